"""Test doubles: a fake NVML binding and a fake ``nvidia-smi`` built from real fixtures."""
