"""``actormem.client.Client`` where httpx is not installed: a ModuleNotFoundError (still
naming httpx, for the CLI's mapping to the extra: tests/test_plain_install.py) whose message
names the extra to install, not a bare ``No module named 'httpx'``; the hosted memory still
imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess[str]:
    # A child whose import system refuses httpx, as on a machine without it.
    prelude = textwrap.dedent(
        """
        import sys
        class _NoHttpx:
            def find_spec(self, name, path=None, target=None):
                if name == "httpx" or name.startswith("httpx."):
                    raise ModuleNotFoundError("No module named 'httpx'", name="httpx")
                return None
        sys.meta_path.insert(0, _NoHttpx())
        for key in [k for k in sys.modules if k == "httpx" or k.startswith("httpx.")]:
            del sys.modules[key]
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_client_names_the_extra_and_the_hosted_memory_imports() -> None:
    done = _run(
        """
        from actormem.client import HostedMemory
        print("hosted", HostedMemory.__name__)
        for name in ("Client", "AsyncClient"):
            try:
                __import__("actormem.client", fromlist=[name])
            except ImportError as exc:
                print(type(exc).__name__, exc.name, exc)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "hosted HostedMemory"
    assert lines[1:] == [
        f"ModuleNotFoundError httpx actormem.client.{name} needs httpx:"
        " pip install 'actormem[client]' (in a clone: pip install -e '.[client]')"
        for name in ("Client", "AsyncClient")
    ]
