"""Copy ../shared/mesos-local/libexec into the build, with a command-executor stand-in that
authenticates: it sends the agent's MESOS_EXECUTOR_AUTHENTICATION_TOKEN as a Bearer header, so
command tasks keep working on an agent with --authenticate_http_executors.

usage: python3 scripts/mesos_executor_patch.py SHARED_LIBEXEC BUILD_LIBEXEC
"""

import shutil
import sys
from pathlib import Path

source, target = Path(sys.argv[1]), Path(sys.argv[2])
target.mkdir(parents=True, exist_ok=True)
shutil.copy2(source / "mesos-containerizer", target / "mesos-containerizer")
text = (source / "mesos-executor").read_text()
edits = [
    (
        "class Driver(MesosExecutorDriver):\n",
        "TOKEN = os.environ.get('MESOS_EXECUTOR_AUTHENTICATION_TOKEN', '').strip()\n"
        "AUTH = {'Authorization': 'Bearer ' + TOKEN} if TOKEN else {}\n"
        "class Driver(MesosExecutorDriver):\n",
    ),
    (
        "replace(b'POST /api/v1/executor ', b'POST %s ' % AGENT_API.encode(), 1)",
        "replace(b'POST /api/v1/executor HTTP/1.1\\r\\n', ('POST %s HTTP/1.1\\r\\n' % AGENT_API"
        " + ''.join('%s: %s\\r\\n' % kv for kv in AUTH.items())).encode(), 1)",
    ),
    (
        "method=method, headers=headers)",
        "method=method, headers=dict(headers, **AUTH))",
    ),
]
for old, new in edits:
    if text.count(old) != 1:
        sys.exit(f"mesos-executor stand-in changed: cannot find {old!r}")
    text = text.replace(old, new)
(target / "mesos-executor").write_text(text)
(target / "mesos-executor").chmod(0o755)
