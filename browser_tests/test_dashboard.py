"""The dashboard in a real browser: Debian's chromium and chromium-driver, driven by Selenium.

``nox -s browser`` runs this (``.ci/run`` installs the two packages first). The
service runs as a user runs it, ``trioqueue serve --handler``, on a free port.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

if TYPE_CHECKING:
    from collections.abc import Iterator

HERE = Path(__file__).resolve().parent
SCREENSHOT = HERE.parent / "docs" / "dashboard.png"
TOKEN = "browser-test-token"
WAIT = 20.0  # seconds for the page to show what the test waits for


def _binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name) or (name if Path(name).exists() else None)
        if found:
            return found
    pytest.fail(  # never a skip: CI must have the browser (apt: chromium chromium-driver)
        f"none of {names} is installed: apt-get install chromium chromium-driver"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def service() -> Iterator[str]:
    """``trioqueue serve`` with a handler that fails each job's first attempt only."""
    port = _free_port()
    handler = "dashboard_handlers:fails_once_when_asked"
    command = [sys.executable, "-m", "trioqueue", "serve", "--bind", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        # --grace 5: a test may leave jobs due later, which the memory backend would
        # otherwise wait 30 s for before it stops
        [*command, "--handler", handler, "--max-attempts", "1", "--grace", "5"],
        cwd=HERE,
        env={**os.environ, "TRIOQUEUE_ADMIN_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("trioqueue serve: listening on"), (
        process.stderr.read() if process.stderr else ""
    )
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.communicate(timeout=30)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    profile = tmp_path / "chromium-profile"  # a new, empty one
    options = webdriver.ChromeOptions()
    options.binary_location = _binary("chromium", "/usr/bin/chromium")
    # headless, and quiet: this machine's network is closed, and chromium's own
    # background connections (updates, sync) would only fail, many at a time
    for argument in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--window-size=1280,900",
        f"--user-data-dir={profile}",
    ):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=_binary("chromedriver", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def _post(base: str, body: dict[str, object]) -> int:
    request = urllib.request.Request(
        base + "jobs",
        data=json.dumps(body).encode(),
        # the service has an admin token: sending jobs needs it too
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return int(reply.status)


def _points(browser: webdriver.Chrome) -> int:
    line = browser.find_element(By.CSS_SELECTOR, "#chart polyline")
    return len((line.get_attribute("points") or "").split())


def _text(browser: webdriver.Chrome, element_id: str) -> str:
    return str(browser.find_element(By.ID, element_id).text)


def test_the_dashboard_shows_the_queue_live_and_requeues_a_dead_letter(service, browser):
    browser.get(service)
    # the page redraws its parts on every poll: an element found may be replaced
    # before it is read, and the wait then looks again
    wait = WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda b: _text(b, "status").startswith("live"))
    assert _text(browser, "c-succeeded") == "0"

    for n in range(20):  # the numbers change while jobs flow
        assert _post(service, {"id": f"ok-{n}", "payload": {"n": n}}) == 201
    wait.until(lambda b: _text(b, "c-succeeded") == "20")

    # a dead letter (its one attempt fails): the service has a token, so the page
    # shows it once given the token, then requeues it
    assert _post(service, {"id": "poison", "payload": {"fail": True}}) == 201
    wait.until(lambda b: _text(b, "g-dead") == "1")
    assert "enter the service's token" in _text(browser, "dead-rows")
    assert not browser.find_elements(By.CSS_SELECTOR, "button[data-requeue='poison']")
    token = browser.find_element(By.ID, "token")
    token.send_keys(TOKEN, Keys.TAB)  # a change event: the page loads the dead letters
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "button[data-requeue='poison']"))
    browser.find_element(By.CSS_SELECTOR, "button[data-requeue='poison']").click()
    wait.until(lambda b: _text(b, "dead-message") == "poison requeued")
    wait.until(lambda b: _text(b, "g-dead") == "0")
    wait.until(lambda b: _text(b, "c-succeeded") == "21")  # it ran again, and passed

    # a job found by its id
    browser.find_element(By.ID, "job-id").send_keys("poison")
    browser.find_element(By.CSS_SELECTOR, "#lookup button").click()
    wait.until(lambda b: '"state": "completed"' in _text(b, "job"))

    # a few polls, so that the chart has lines to show in the screenshot
    wait.until(
        lambda b: (
            b.find_element(By.CSS_SELECTOR, "#chart polyline").get_attribute("points").count(" ")
            >= 4
        )
    )
    # the rate needs two polls: the first draws no point of it (it used to draw 0.0)
    depths, rates = browser.execute_script(  # both at once: a poll redraws the chart
        "return [...document.querySelectorAll('#chart polyline')]"
        ".map(line => line.getAttribute('points').split(' ').length)"
    )
    assert rates == depths - 1
    SCREENSHOT.parent.mkdir(exist_ok=True)
    browser.execute_script("window.scrollTo(0, 0)")  # the lookup scrolled down to its answer
    browser.save_screenshot(str(SCREENSHOT))
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def test_the_dashboard_shows_dead_letters_a_page_at_a_time(service, browser):
    for n in range(105):  # more than one page of 100
        assert _post(service, {"id": f"poison-{n:03}", "payload": {"fail": True}}) in (201, 202)
    browser.get(service)
    wait = WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda b: _text(b, "g-dead") == "105")
    browser.find_element(By.ID, "token").send_keys(TOKEN, Keys.TAB)

    def shown(b: webdriver.Chrome) -> int:
        return len(b.find_elements(By.CSS_SELECTOR, "button[data-requeue]"))

    wait.until(lambda b: shown(b) == 100 and b.find_elements(By.ID, "dead-more"))
    browser.find_element(By.ID, "dead-more").click()
    wait.until(lambda b: shown(b) == 105 and not b.find_elements(By.ID, "dead-more"))
    ids = [
        button.get_attribute("data-requeue")
        for button in browser.find_elements(By.CSS_SELECTOR, "button[data-requeue]")
    ]
    assert sorted(ids) == [f"poison-{n:03}" for n in range(105)]
    # what the page fetched: summaries (no payloads), a page at a time
    fetched = browser.execute_script(
        "return performance.getEntriesByType('resource').map(entry => entry.name)"
    )
    dead = [url for url in fetched if "/dead?" in url]
    assert dead
    assert all("summary=true" in url for url in dead), dead
    assert any("cursor=100" in url for url in dead), dead
    # the page's refresh (every 5 s) redraws the rows and keeps those "More" showed
    last = browser.find_elements(By.CSS_SELECTOR, "button[data-requeue]")[-1]
    WebDriverWait(browser, WAIT).until(expected_conditions.staleness_of(last))
    wait.until(lambda b: shown(b) == 105 and not b.find_elements(By.ID, "dead-more"))
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def test_the_dashboard_pauses_and_resumes_the_queue_with_the_token(service, browser):
    browser.get(service)
    wait = WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda b: _text(b, "status").startswith("live"))
    assert not browser.find_element(By.ID, "paused").is_displayed()
    toggle = browser.find_element(By.ID, "pause-toggle")
    assert toggle.text == "Pause queue"
    toggle.click()  # no token yet: refused, and the page says why
    wait.until(lambda b: "token" in _text(b, "queue-message"))
    assert not browser.find_element(By.ID, "paused").is_displayed()

    browser.find_element(By.ID, "token").send_keys(TOKEN, Keys.TAB)
    browser.find_element(By.ID, "pause-toggle").click()
    wait.until(lambda b: b.find_element(By.ID, "paused").is_displayed())
    assert _text(browser, "queue-message").startswith("paused: workers finish")
    assert _text(browser, "pause-toggle") == "Resume queue"
    # a job posted while paused waits on the queue
    assert _post(service, {"id": "held", "payload": {"n": 1}}) == 201
    wait.until(lambda b: _text(b, "g-queue_depth") == "1")
    assert _text(browser, "c-succeeded") == "0"

    browser.find_element(By.ID, "pause-toggle").click()
    wait.until(lambda b: not b.find_element(By.ID, "paused").is_displayed())
    wait.until(lambda b: _text(b, "c-succeeded") == "1")
    assert _text(browser, "pause-toggle") == "Pause queue"
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def test_the_dashboard_browses_a_place_and_runs_cancels_and_requeues_jobs(service, browser):
    for n in range(55):  # more than one page of 50, all waiting for an hour
        assert _post(service, {"id": f"later-{n:02}", "payload": {"n": n}, "delay": 3600}) == 202
    assert _post(service, {"id": "poison", "payload": {"fail": True}}) == 201
    browser.get(service)
    wait = WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(lambda b: _text(b, "g-dead") == "1")
    assert "enter the service's token" in _text(browser, "job-rows")
    browser.find_element(By.ID, "token").send_keys(TOKEN, Keys.TAB)
    Select(browser.find_element(By.ID, "place")).select_by_value("scheduled")

    def shown(b: webdriver.Chrome, kind: str) -> list[str]:
        return [
            str(button.get_attribute(f"data-{kind}"))
            for button in b.find_elements(By.CSS_SELECTOR, f"#job-rows button[data-{kind}]")
        ]

    wait.until(lambda b: len(shown(b, "run")) == 50 and b.find_elements(By.ID, "jobs-more"))
    assert shown(browser, "run")[:2] == ["later-00", "later-01"]  # soonest due first
    browser.find_element(By.ID, "jobs-more").click()
    wait.until(lambda b: len(shown(b, "run")) == 55 and not b.find_elements(By.ID, "jobs-more"))

    # run one now: it leaves the place, and runs
    browser.find_element(By.CSS_SELECTOR, "button[data-run='later-07']").click()
    wait.until(lambda b: _text(b, "jobs-message") == "later-07 runs now")
    wait.until(lambda b: "later-07" not in shown(b, "run"))
    wait.until(lambda b: _text(b, "c-succeeded") == "1")
    # cancel another: it is gone from the place, cancelled
    browser.find_element(By.CSS_SELECTOR, "button[data-cancel='later-08']").click()
    wait.until(lambda b: _text(b, "jobs-message") == "later-08: cancel asked")
    wait.until(lambda b: "later-08" not in shown(b, "run") and len(shown(b, "run")) == 53)

    # the dead letter, from the browser's dead place: requeued, it runs again and passes
    Select(browser.find_element(By.ID, "place")).select_by_value("dead")
    wait.until(lambda b: shown(b, "retry") == ["poison"])
    assert shown(browser, "cancel") == []  # a finished job has nothing to cancel
    browser.find_element(By.CSS_SELECTOR, "button[data-retry='poison']").click()
    wait.until(lambda b: _text(b, "jobs-message") == "poison requeued")
    wait.until(lambda b: _text(b, "c-succeeded") == "2")
    Select(browser.find_element(By.ID, "place")).select_by_value("finished")
    wait.until(lambda b: {"later-07", "later-08", "poison"} <= set(_row_ids(b)))
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def _row_ids(browser: webdriver.Chrome) -> list[str]:
    return [
        str(row.find_element(By.CSS_SELECTOR, "td").text)
        for row in browser.find_elements(By.CSS_SELECTOR, "#job-rows tr")
    ]
