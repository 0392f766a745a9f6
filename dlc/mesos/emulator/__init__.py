"""The in-process Mesos master + agent emulator (v1 scheduler and executor HTTP APIs)."""
