"""The Mesos executor: runs a DLC task as a Docker container with its reserved GPUs."""
