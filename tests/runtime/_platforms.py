"""The host platforms the config tests compose for: a Linux CUDA box, a CPU-only Linux box, a Mac."""

from soakbench.runtime.config import PlatformFacts

LINUX_CUDA = PlatformFacts(
    system="Linux", cuda_available=True, cuda_device_count=1, hip_build=False, mps_available=False
)
LINUX_CPU = PlatformFacts(
    system="Linux", cuda_available=False, cuda_device_count=0, hip_build=False, mps_available=False
)
MACOS = PlatformFacts(
    system="Darwin", cuda_available=False, cuda_device_count=0, hip_build=False, mps_available=True
)
