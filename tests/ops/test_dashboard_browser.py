"""The dashboard in a real browser: Debian's headless Chromium (through its chromedriver and
selenium) loads the page from a real example server, signs in with the admin token, sees
tasks that a real client (``mcptask``) creates appear and change status live (no reload),
opens one, cancels one (R-CANCEL-2), filters by status, and takes the README's screenshot;
then signs in again through the docs' link (``#token=``) with a token of the docs' recipe.

Chromium and chromedriver come from Debian's ``chromium`` and ``chromium-driver`` packages
(``.ci/run`` installs them); without them this test is skipped, or fails under ``CI``.
``MCPTASK_SCREENSHOT=docs/dashboard.png`` writes the screenshot there (how the README's
was taken); it always goes to the test's temporary directory too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from mcp_tasks.protocol import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING
from testkit import wait
from testkit.ops import ALICE, BOB, OpsServer, mcp_session, start_task

# the dashboard: the door is not what is tested (testkit.doors)
pytestmark = pytest.mark.door_agnostic

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Chromium as root on a machine without a network: no sandbox, nothing in the background
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1600,1000", "--hide-scrollbars",
)  # fmt: skip
#: an admin token as docs/operating.md makes them (base64: `+`, `/`, and `=` in some)
ADMIN_TOKEN = "Ab+/cd+ef/gh+ij/kl+mn/op+qr/st=="


def _need_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        msg = (
            f"{', '.join(missing)} missing: the dashboard test needs Debian's chromium and "
            "chromium-driver packages (apt-get install -y chromium chromium-driver; .ci/run "
            "installs them)"
        )
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    service = Service(CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def until(check: Callable[[], Any], what: str) -> Any:
    """Wait until ``check`` returns something true (the page updates by itself); an element
    re-rendered under the probe counts as "not yet"."""
    from selenium.common.exceptions import WebDriverException

    return wait.until(check, ignoring=(WebDriverException,), what=what)


def click(driver: Any, selector: str) -> None:
    """Click what ``selector`` finds, in the page itself: rows are re-rendered on every
    change, so an element found first may be replaced before a click from outside lands.
    The click runs after the script returns (it may open a dialog)."""
    script = (
        "const e = document.querySelector(arguments[0]);"
        " if (e) setTimeout(() => e.click(), 0); return !!e"
    )
    until(lambda: driver.execute_script(script, selector), selector)


def statuses(driver: Any) -> dict[str, str]:
    """Task ID -> status, as the table shows them now."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#rows tr')].map(r => [r.dataset.id, r.dataset.status])"
    )
    return {tid: status for tid, status in rows}


def tile_count(driver: Any, status: str) -> str:
    """The number a status tile shows."""
    script = "const t = document.querySelector(`.tile[data-status='${arguments[0]}'] .n`); return t && t.textContent"
    return str(driver.execute_script(script, status))


def transitions(driver: Any) -> int:
    """CSS transitions running now (a changed row's highlight fading)."""
    script = "return document.getAnimations().filter((a) => a instanceof CSSTransition).length"
    return int(driver.execute_script(script))


def test_dashboard_live_in_a_real_browser(
    ops_server_factory: Callable[..., OpsServer], browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    server = ops_server_factory(admin_token=ADMIN_TOKEN)
    driver = browser
    driver.get(server.ops_url + "/admin/")
    # signing in: the page asks for the admin token; a requestor's token is refused
    until(lambda: driver.find_element(By.ID, "token").is_displayed(), "the sign-in form")
    driver.find_element(By.ID, "token").send_keys(ALICE)
    driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
    until(lambda: driver.find_element(By.ID, "login-error").is_displayed(), "the refusal")
    assert "refused" in driver.find_element(By.ID, "login-error").text
    driver.find_element(By.ID, "token").clear()
    driver.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
    driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
    until(lambda: driver.find_element(By.ID, "live").get_attribute("data-state") == "on", "live")
    driver.execute_script("window.__samePage = true")  # gone if the page reloads

    # tasks made by a real client appear, and change status, while the page stays
    quick = start_task(server, ALICE, "slow_compute", "seconds=10", "label=live")
    seen: list[str] = [until(lambda: statuses(driver).get(quick), "the new task's row")]
    slow = start_task(server, BOB, "slow_compute", "seconds=600", "label=stuck")
    failed = start_task(server, BOB, "failing_job")

    def quick_completed() -> bool:
        status = statuses(driver).get(quick)
        if status and (not seen or seen[-1] != status):
            seen.append(status)
        return status == COMPLETED.value

    until(lambda: statuses(driver).get(failed) == FAILED.value, "failing_job failed")
    assert statuses(driver).get(slow) == WORKING.value
    until(quick_completed, "slow_compute(10) completed live")
    assert seen[0] == WORKING.value and seen[-1] == COMPLETED.value, seen
    assert driver.execute_script("return window.__samePage") is True  # no reload: live

    # open one: its detail (status, message, timings, tool, requestor)
    click(driver, f'tr[data-id="{failed}"]')
    detail = until(lambda: driver.find_element(By.ID, "detail").text, "the detail")
    until(lambda: "Tool error: job failed" in driver.find_element(By.ID, "detail").text, "msg")
    detail = driver.find_element(By.ID, "detail").text.lower()  # headings are upper-cased
    for text in (failed, "failing_job", "subject:bob", "duration", "result (iserror)"):
        assert text.lower() in detail, text
    assert not driver.find_element(By.ID, "cancel").is_enabled()  # terminal: no cancel

    # cancel another requestor's running task: the page and the requestor both see it
    click(driver, f'tr[data-id="{slow}"]')
    until(lambda: driver.find_element(By.ID, "cancel").is_enabled(), "the cancel button")
    click(driver, "#cancel")
    until(lambda: driver.switch_to.alert, "the confirmation").accept()
    until(lambda: statuses(driver).get(slow) == CANCELLED.value, "the task cancelled")
    assert "cancelled by an operator" in driver.find_element(By.ID, "detail").text.lower()
    _, got = mcp_session(server, BOB).post("tasks/get", {"taskId": slow})
    assert got["result"]["status"] == CANCELLED.value

    # filters: the failed tile keeps the failed tasks only
    click(driver, '.tile[data-status="failed"]')
    until(lambda: set(statuses(driver)) == {failed}, "the failed filter")
    click(driver, '.tile[data-status="all"]')
    until(lambda: len(statuses(driver)) == 3, "every task again")
    # the age filters offer what the admin API reads (NUMBER + s|m|h|d), named for people
    ages = "return [...document.querySelectorAll('#f-older option')].map((o) => [o.value, o.text])"
    assert driver.execute_script(ages) == [
        ["", "any age"], ["1m", "1 minute"], ["15m", "15 minutes"], ["1h", "1 hour"], ["24h", "24 hours"]
    ]  # fmt: skip
    _screenshot(server, driver, tmp_path)
    _signed_in_by_link(server, driver)


def _signed_in_by_link(server: OpsServer, driver: Any) -> None:
    """The link ``/admin/#token=...`` signs in with the token as given, `+` included: written
    percent-encoded as the docs make it, and pasted as is."""
    from selenium.webdriver.common.by import By

    for fragment in (quote(ADMIN_TOKEN, safe=""), ADMIN_TOKEN):
        driver.execute_script("sessionStorage.clear()")
        driver.get("about:blank")
        driver.get(f"{server.ops_url}/admin/#token={fragment}")
        until(
            lambda: driver.find_element(By.ID, "live").get_attribute("data-state") == "on",
            f"signed in by #token={fragment}",
        )
        stored = driver.execute_script("return sessionStorage.getItem('mcp-tasks-admin-token')")
        assert stored == ADMIN_TOKEN
        assert "#" not in driver.current_url  # the page drops the token from the address


def _screenshot(server: OpsServer, driver: Any, tmp_path: Path) -> None:
    """More tasks of every kind, one waiting for input opened, then the picture."""
    from selenium.webdriver.common.by import By

    start_task(server, ALICE, "slow_compute", "seconds=900", "label=q3-report")
    start_task(server, BOB, "protocol_error_job")
    asking = start_task(server, ALICE, "confirm_delete", "path=/srv/exports/2026-11.csv")
    start_task(server, BOB, "slow_compute", "seconds=1200", "label=reindex")
    until(lambda: statuses(driver).get(asking) == INPUT_REQUIRED.value, "input_required")
    click(driver, f'tr[data-id="{asking}"]')
    until(lambda: "Delete /srv/exports" in driver.find_element(By.ID, "detail").text, "input")
    until(lambda: len(statuses(driver)) == 7, "every task listed")
    until(lambda: tile_count(driver, "all") == "7", "the tiles count every task")
    until(lambda: not transitions(driver), "the rows' highlight faded")
    shot = tmp_path / "dashboard.png"
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    target = os.environ.get("MCPTASK_SCREENSHOT")
    if target:
        shutil.copyfile(shot, target)
