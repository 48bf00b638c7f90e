"""Finding the sidecar's address and token as the patina CLI does."""

from __future__ import annotations

import json
import os
from typing import Mapping, Optional, Tuple

DEFAULT_ADDR = "127.0.0.1:7070"


def state_dir(env: Mapping[str, str] = os.environ) -> str:
    """PATINA_STATE_DIR, else $XDG_STATE_HOME/patina, else ~/.local/state/patina."""
    if env.get("PATINA_STATE_DIR"):
        return os.path.abspath(env["PATINA_STATE_DIR"])
    if env.get("XDG_STATE_HOME"):
        return os.path.join(env["XDG_STATE_HOME"], "patina")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".local", "state", "patina")


def resolve(url: Optional[str], token: Optional[str], env: Mapping[str, str] = os.environ) -> Tuple[str, str]:
    """The sidecar's base URL and token: the arguments, else PATINA_ADDR and
    PATINA_TOKEN, else the state directory's sidecar.json and token file
    (the state directory being PATINA_STATE_DIR, else $XDG_STATE_HOME/patina,
    else ~/.local/state/patina), else 127.0.0.1:7070 and no token."""
    directory = state_dir(env)
    if not url:
        url = env.get("PATINA_ADDR") or ""
    if not url:
        try:
            with open(os.path.join(directory, "sidecar.json"), encoding="utf-8") as f:
                url = str(json.load(f).get("addr") or "")
        except (OSError, ValueError):
            url = ""
    if not url:
        url = DEFAULT_ADDR
    if "://" not in url:
        url = "http://" + url
    if token is None:
        token = env.get("PATINA_TOKEN") or None
    if token is None:
        try:
            with open(os.path.join(directory, "token"), encoding="utf-8") as f:
                token = f.read().strip()
        except OSError:
            token = ""
    return url.rstrip("/"), token
