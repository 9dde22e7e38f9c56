import zlib

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A random generator seeded from the test id: reproducible, different per case."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
