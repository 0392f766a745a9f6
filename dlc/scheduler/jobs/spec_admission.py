"""Admission checks of a spec against the scheduler's settings (run at submit).

Unlike :meth:`~dlc.scheduler.jobs.spec.JobSpec.check`, these depend on how the operator
started the scheduler: the ``--allow-volume`` prefixes, the allowed registries, and whether
jobs may pick their container user.
"""

from __future__ import annotations

from dlc.errors import JobSpecError
from dlc.images.reference import ImageReferenceError, registry_allowed
from dlc.scheduler.jobs.launch_spec import TaskPolicy, parse_user
from dlc.scheduler.jobs.spec import JobSpec
from dlc.scheduler.jobs.spec_fields import _short
from dlc.scheduler.jobs.spec_rules import PLATFORM_STATE, STATE_FIX, state_overlap

#: user their own tree, so one user's job cannot mount (read or rewrite) another's files
USER_PLACEHOLDER = "{user}"


def user_prefixes(allowed_prefixes: tuple[str, ...], user: str) -> tuple[str, ...]:
    """The allow-list as it applies to ``user`` (``{user}`` replaced by their name).

    A user name that could change the path's meaning (``/``, ``..``, NUL) gets no
    per-user prefix at all.
    """
    safe = bool(user) and "/" not in user and "\0" not in user and user not in (".", "..")
    return tuple(
        p.replace(USER_PLACEHOLDER, user)
        for p in allowed_prefixes
        if USER_PLACEHOLDER not in p or safe
    )


def check_volumes(spec: JobSpec, allowed_prefixes: tuple[str, ...], user: str = "") -> None:
    """Refuse host paths outside the scheduler's allow-list (an early, friendly error).

    This compares strings only; the authoritative check runs on the agent, where the
    filesystem is (:mod:`dlc.executor.host_paths`: no symlinks, must exist, and DLC's state
    where that agent really keeps it). Here a path that is, contains or lies inside DLC's state
    at its default places (:data:`~dlc.scheduler.jobs.spec_rules.PLATFORM_STATE`) is refused
    even under an allowed prefix, with the agent's words.

    Raises:
        JobSpecError: a volume's host path is not under an allowed prefix, or reaches DLC's
            state.
    """
    allowed_prefixes = user_prefixes(allowed_prefixes, user)
    for vol in spec.volumes:
        norm = vol.host_path.rstrip("/") or "/"
        if any(p in (".", "..") for p in norm.split("/")) or not any(
            norm == p.rstrip("/") or norm.startswith(p.rstrip("/") + "/") for p in allowed_prefixes
        ):
            allowed = ", ".join(allowed_prefixes) or "none (the scheduler allows no volumes)"
            raise JobSpecError(
                "volumes",
                f"{vol.host_path} is not under an allowed host path; allowed: {allowed}; "
                "mount a path under one of them (the scheduler's --allow-volume sets the list)",
            )
        reason = state_overlap(norm, PLATFORM_STATE)
        if reason:
            raise JobSpecError("volumes", f"{vol.host_path}: {reason}; {STATE_FIX}")


def check_registry(spec: JobSpec, image: str, allowed_registries: tuple[str, ...]) -> None:
    """Refuse ``image`` (``spec``'s, resolved) from a registry outside the allow-list.

    An empty allow-list allows any registry.

    Raises:
        JobSpecError: the registry is not allowed (field ``image``, or ``framework`` when the
            image came from the catalog).
    """
    key = "image" if spec.image else "framework"
    try:
        reason = registry_allowed(image, allowed_registries)
    except ImageReferenceError as exc:
        raise JobSpecError(key, f"{_short(image)}: {exc}") from None
    if reason:
        raise JobSpecError(key, reason)


def check_container_user(spec: JobSpec, policy: TaskPolicy) -> None:
    """Refuse a job's own container user unless the operator lets jobs choose (and root).

    Raises:
        JobSpecError: field ``container_user``, with what the cluster allows.
    """
    if spec.container_user is None:
        return
    if not policy.allow_job_user:
        raise JobSpecError(
            "container_user",
            f"this cluster does not let jobs choose their user (jobs run as "
            f"{policy.container_user}); leave it out, or ask the operator for --allow-job-user",
        )
    if 0 in parse_user(spec.container_user) and not policy.allow_root:
        raise JobSpecError(
            "container_user",
            f"{spec.container_user} is root, which this cluster does not allow; "
            "use a non-zero UID:GID",
        )
