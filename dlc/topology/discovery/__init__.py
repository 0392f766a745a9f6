"""Reading a machine's GPU topology: NVML, nvidia-smi, and the discovery order."""
