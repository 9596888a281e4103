"""The README's "Limits and security" section tells the truth about defaults and flags."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_tasks.examples import server as example
from mcp_tasks.runtime import EngineConfig

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_limits_and_security_section_matches_the_server() -> None:
    section = README.split("## Limits and security", 1)[1].split("\n## ", 1)[0]
    cfg = EngineConfig()
    rows = {m[3]: m[2] for m in re.finditer(r"\| ([^|]+) \| ([^|]+) \| `([^`]+)` \|", section)}
    flags = {flag.split()[0]: default for flag, default in rows.items()}
    assert set(flags) == {
        "--max-active",
        "--rate-limit",
        "--max-ttl",
        "--default-ttl",
        "--page-size",
    }
    assert flags["--max-active"].startswith(f"{cfg.max_active_per_requestor};")
    assert flags["--rate-limit"].startswith(
        f"{cfg.rate_limit_calls:,} per {cfg.rate_limit_window_s:g} s;"
    )
    assert cfg.max_ttl_ms == 24 * 3600 * 1000 and flags["--max-ttl"].startswith("24 h;")
    assert cfg.default_ttl_ms == 3600 * 1000 and flags["--default-ttl"].strip() == "1 h"
    assert flags["--page-size"].strip() == str(cfg.page_size)
    for flag in flags:  # every flag exists and parses
        value = "5/2" if flag == "--rate-limit" else "7"
        example._parse_args(["--stdio", flag, value])
    assert "tests/security/soak.py" in section
