"""ctypes wrapper around libann.so (Arm NN delegate); only used by the armnn image."""
from ctypes import CDLL

libann = None


def load(path: str = "/opt/armnn/libann.so") -> None:
    global libann
    libann = CDLL(path)
