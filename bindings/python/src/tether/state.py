"""``--state FILE`` for ``tether-py req`` and ``sse``: the same file format as ``tether``'s
(``{"tether":"state","version":1,"command":...,"targets":[...],"subscriptions":[...],
"checkpoint":{...}}``), replaced atomically: written beside it, fsynced, renamed, the
directory fsynced. A file that is not one, is corrupt, is for another command or other
targets, or comes from a newer version is refused (exit 2) and left untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

VERSION = 1


class StateError(ValueError):
    """The state file cannot be resumed from; the message is one line."""


class StateFile:
    def __init__(self, path: str, command: str, targets: list[str]) -> None:
        self.path = Path(path)
        self.command = command
        self.targets = targets

    def refuse(self, why: str) -> StateError:
        return StateError(f"--state {self.path}: {why}")

    def load(self) -> tuple[list[tuple[str, int]], bytes] | None:
        """``(subscriptions as (filter, id), checkpoint JSON bytes)``, or ``None`` when the
        file does not exist yet."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise self.refuse(f"cannot read it: {error}") from None
        try:
            doc = json.loads(data)
        except ValueError:
            raise self.refuse("not a tether state file") from None
        if not isinstance(doc, dict) or doc.get("tether") != "state":
            raise self.refuse("not a tether state file")
        version = doc.get("version")
        if not isinstance(version, int):
            raise self.refuse("not a tether state file")
        if version > VERSION:
            raise self.refuse(
                f"written by a newer tether (state version {version}, this one reads {VERSION})"
            )
        try:
            command, targets = doc["command"], doc["targets"]
            subs = [(str(s["filter"]), int(s["id"])) for s in doc["subscriptions"]]
            checkpoint = json.dumps(doc["checkpoint"], separators=(",", ":")).encode()
        except (KeyError, TypeError, ValueError) as error:
            raise self.refuse(f"corrupt: {error}") from None
        if command != self.command:
            raise self.refuse(f"the state of a `tether {command}` run")
        if targets != self.targets:
            raise self.refuse(
                f"the state of a run on {' '.join(map(str, targets))}, not {' '.join(self.targets)}"
            )
        return subs, checkpoint

    def store(self, subscriptions: list[tuple[str, int]], checkpoint: bytes) -> None:
        """Replace the file with this state."""
        doc = (
            f'{{"tether":"state","version":{VERSION},"command":{json.dumps(self.command)},'
            f'"targets":{json.dumps(self.targets)},'
            f'"subscriptions":{json.dumps([{"filter": f, "id": i} for f, i in subscriptions])},'
            f'"checkpoint":{checkpoint.decode()}}}'
        )
        directory = self.path.parent if str(self.path.parent) else Path(".")
        temp = directory / f".{self.path.name}.tmp-{os.getpid()}"
        with open(temp, "wb") as file:
            file.write(doc.encode())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, self.path)
        try:
            fd = os.open(directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def canonical_filter(text: str) -> str:
    """A filter's JSON as the state file keeps it (sorted keys, compact)."""
    return json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
