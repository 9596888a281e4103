"""The README's "Limits and security" section tells the truth about defaults and flags."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_tasks.examples import server as example
from mcp_tasks.runtime import EngineConfig
from mcp_tasks.runtime.http.slow_clients import DEFAULT_PER_ADDRESS, default_max_connections

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
#: the security page the README links, whose limits table names every flag
SECURITY = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()


def test_limits_and_security_section_matches_the_server() -> None:
    section = SECURITY
    cfg = EngineConfig()
    rows = {m[3]: m[2] for m in re.finditer(r"\| ([^|]+) \| ([^|]+) \| `([^`]+)` \|", section)}
    flags = {flag.split()[0]: default for flag, default in rows.items()}
    assert set(flags) == {
        "--max-active",
        "--rate-limit",
        "--max-ttl",
        "--default-ttl",
        "--page-size",
        "--max-tasks",
        "--max-result-bytes",
        "--max-result-bytes-per-requestor",
        "--max-tasks-total",
        "--max-result-bytes-total",
        "--max-sessions-per-requestor",
        "--max-sessions",
        "--session-idle-timeout",
        "--header-timeout",
        "--max-head-bytes",
        "--max-headers",
        "--request-timeout",
        "--min-body-rate",
        "--body-timeout",
        "--send-timeout",
        "--keep-alive-timeout",
        "--max-connections",
        "--max-connections-per-address",
        "--forwarded-allow-ips",
    }
    assert flags["--max-active"].startswith(f"{cfg.max_active_per_requestor};")
    assert flags["--rate-limit"].startswith(
        f"{cfg.rate_limit_calls:,} per {cfg.rate_limit_window_s:g} s;"
    )
    assert cfg.max_ttl_ms == 24 * 3600 * 1000 and flags["--max-ttl"].startswith("24 h;")
    assert cfg.default_ttl_ms == 3600 * 1000 and flags["--default-ttl"].strip() == "1 h"
    assert flags["--page-size"].strip() == str(cfg.page_size)
    assert flags["--max-tasks"].startswith(f"{cfg.max_tasks_per_requestor:,} (10 × `--max-active`)")
    assert cfg.max_result_bytes == 4 << 20 and flags["--max-result-bytes"].startswith("4 MiB ")
    assert cfg.max_result_bytes_per_requestor == 64 << 20
    assert flags["--max-result-bytes-per-requestor"].startswith("64 MiB;")
    assert flags["--max-tasks-total"].startswith(f"{cfg.max_tasks_total:,} ")
    assert cfg.max_result_bytes_total == 1 << 30
    assert flags["--max-result-bytes-total"].startswith("1 GiB;")
    defaults = example._parse_args(["--http", "127.0.0.1:1"])
    assert flags["--max-sessions-per-requestor"].startswith(
        f"{defaults.max_sessions_per_requestor:,};"
    )
    assert flags["--max-sessions"].startswith(f"{defaults.max_sessions:,};")
    assert defaults.session_idle_timeout == 1800 and flags["--session-idle-timeout"] == "30 min"
    for flag in (
        "--header-timeout",
        "--request-timeout",
        "--body-timeout",
        "--send-timeout",
        "--keep-alive-timeout",
    ):
        seconds = getattr(defaults, flag[2:].replace("-", "_"))
        assert flags[flag].startswith(f"{seconds:g} s"), (flag, flags[flag])
    assert defaults.max_head_bytes == 64 << 10 and flags["--max-head-bytes"].startswith("64 KiB;")
    assert flags["--max-headers"].startswith(f"{defaults.max_headers};")
    least, window = defaults.body_rate
    assert flags["--min-body-rate"].startswith(f"{least} bytes per {window:g} s ")
    assert default_max_connections(1024) == 896
    assert flags["--max-connections"].startswith("the descriptor limit ")
    assert "(896 of 1,024)" in flags["--max-connections"]
    assert flags["--max-connections-per-address"].startswith(f"{DEFAULT_PER_ADDRESS}, ")
    assert defaults.forwarded_allow_ips is None
    assert flags["--forwarded-allow-ips"].startswith("the socket's peer")
    values = {"--rate-limit": "5/2", "--max-tasks": "1000", "--max-result-bytes": "1000"}
    values["--max-result-bytes-per-requestor"] = str(64 << 20)
    values["--forwarded-allow-ips"] = "127.0.0.1"
    values["--max-tasks-total"] = "100000"
    values["--max-result-bytes-total"] = str(1 << 30)
    for flag in flags:  # every flag exists and parses
        example._parse_args(["--http", "127.0.0.1:1", flag, values.get(flag, "7")])
    assert "tests/security/soak.py" in section
