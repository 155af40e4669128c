"""The status page (`/ui`, docs/ui.md) in a real headless Chromium (Debian's chromium
and chromium-driver, driven by selenium) against a live controller with two agents,
running, pending and reserved jobs, demand, a provider request and a lease: the
sign-in form (a wrong token shows it again with an error), the page showing the
test's jobs and hosts, its reload script, sign-out; and without a browser: 401 for an
unauthenticated request (the form for a browser, JSON for an API client), the
cookie's attributes, escaping, and a page complete with scripts off.

The screenshot is kept at tests/artifacts/ui.png (XCE_UI_SCREENSHOT: elsewhere).
"""

from __future__ import annotations

import base64
import http.cookies
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import LiveCluster, live_cluster, skip_unless_linux, wait_for
from packages import PackageError, apt_install

pytestmark = skip_unless_linux

SCREENSHOT = Path(os.environ.get("XCE_UI_SCREENSHOT",
                                 Path(__file__).parent / "artifacts" / "ui.png"))
PACKAGES = ("chromium", "chromium-driver")
CONFIG = """\
cluster: uitest
session_interval: 0.2
reserve_depth: 1
resources:
  cloud: {type: boolean}
hosts:
  - {name: n1, slots: 2}
  - {name: n2, slots: 2}
queues:
  - {name: normal, priority: 30}
catalog:
  templates:
    - {name: cloud, provider: aws, slots: 4, max: 3, price: 0.5, resources: {cloud: true}}
"""
XSS = "<img src=x onerror=alert(1)>"
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                      urllib.request.HTTPErrorProcessor())


def _browser_binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
    return (browser, driver) if browser and driver else None


def _install_browser() -> tuple[str, str]:
    """chromium and chromedriver, installed with apt-get when missing (as root or
    with sudo); a failure says why (never a silent skip)."""
    found = _browser_binaries()
    if found is not None:
        return found
    try:
        apt_install(PACKAGES)
    except PackageError as err:
        pytest.fail(str(err))
    found = _browser_binaries()
    if found is None:
        pytest.fail(f"installed {' '.join(PACKAGES)}, but chromium or chromedriver is "
                    "still not on PATH")
    return found


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """A headless Chromium driven by selenium."""
    browser, driver = _install_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--disable-gpu", "--window-size=1400,1000", "--no-proxy-server"):
        options.add_argument(flag)
    made = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield made
    finally:
        made.quit()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with live_cluster(tmp_path_factory.mktemp("live-ui"), CONFIG,
                      agents=("n1", "n2"), users=("alice",)) as made:
        made.start_controller()
        made.start_agent("n1", slots=2)
        made.start_agent("n2", slots=2)
        made.add_token("provisioner", "prov")
        made.add_token("agent", "n9")
        yield made


@pytest.fixture(scope="module")
def jobs(cluster: LiveCluster) -> dict[str, int]:
    """Two running jobs filling the static hosts, one reserved behind them, one
    waiting for a cloud host (a request of one is in flight for it), one held."""
    made = {
        "run1": cluster.submit(["sleep", "300"], n=2, run_limit=600, name="run-one"),
        "run2": cluster.submit(["sleep", "300"], n=2, run_limit=600, name="run-two"),
    }
    for key in ("run1", "run2"):
        cluster.wait_state(made[key], "RUN")
    made["reserved"] = cluster.submit(["sleep", "1"], n=2, hosts=["n1", "n2"], name="next")
    made["cloud"] = cluster.submit(["sleep", "1"], n=4, res="select[cloud]", name=XSS)
    made["held"] = cluster.submit(["sleep", "1"], hold=True, name="held-one", who="alice")
    wait_for(lambda: cluster.job(made["reserved"])["expected_start"], 10, "a reservation")
    cluster.lease("prov", "aws")
    cluster.ok("POST", "/requests", {"template": "cloud", "count": 1,
                                     "request": "prov-ui-1", "jobs": [made["cloud"]]}, "prov")
    return made


def fetch(cluster: LiveCluster, path: str, *, method: str = "GET", body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """One request without following redirects: status, headers, body."""
    request = urllib.request.Request(cluster.url + path, data=body, method=method,
                                     headers=headers or {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect())
    try:
        with opener.open(request, timeout=15) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def sign_in(cluster: LiveCluster, token: str) -> tuple[int, dict[str, str]]:
    status, headers, _ = fetch(
        cluster, "/ui/signin", method="POST",
        body=urllib.parse.urlencode({"token": token}).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"})
    return status, headers


def save_screenshot(chromium: Any) -> None:
    """The whole page (beyond the window) as a PNG at SCREENSHOT."""
    size = chromium.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = chromium.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                 "scale": 1}})
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.write_bytes(base64.b64decode(shot["data"]))
    print(f"\nscreenshot of the status page: {SCREENSHOT}")


def test_unauthenticated_ui_is_refused(cluster: LiveCluster) -> None:
    status, headers, text = fetch(cluster, "/ui", headers={"Accept": "text/html"})
    assert status == 401 and headers["Content-Type"].startswith("text/html")
    assert 'action="/ui/signin"' in text and 'method="post"' in text
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    status, headers, text = fetch(cluster, "/ui", headers={"Accept": "application/json"})
    assert status == 401 and headers["Content-Type"].startswith("application/json")
    assert '"status":401' in text
    assert fetch(cluster, "/ui", headers={"Authorization": "Bearer nope"})[0] == 401
    status, _, text = fetch(cluster, "/ui?token=" + cluster.token("admin"),
                            headers={"Accept": "text/html"})
    assert status == 401, "a token in the URL is never taken"
    assert sign_in(cluster, "xce_wrong")[0] == 401
    assert sign_in(cluster, cluster.token("n9"))[0] == 403  # an agent may not read
    forged = {"Cookie": "xce_session=abc.def", "Accept": "text/html"}
    assert fetch(cluster, "/ui", headers=forged)[0] == 401


def test_cookie_session_and_sign_out(cluster: LiveCluster, jobs: dict[str, int]) -> None:
    status, headers = sign_in(cluster, cluster.token("alice"))
    assert status == 303 and headers["Location"] == "/ui"
    morsel = http.cookies.SimpleCookie(headers["Set-Cookie"])["xce_session"]
    assert morsel["httponly"] and morsel["samesite"] == "Strict" and morsel["path"] == "/ui"
    assert cluster.token("alice") not in headers["Set-Cookie"]
    cookie = {"Cookie": f"xce_session={morsel.value}"}
    status, _, text = fetch(cluster, "/ui", headers=cookie)
    assert status == 200 and "alice (user)" in text
    assert fetch(cluster, "/jobs", headers=cookie)[0] == 401, "the cookie is for /ui only"
    status, headers, _ = fetch(cluster, "/ui/signout", method="POST", headers=cookie)
    assert status == 303 and "xce_session=" in headers["Set-Cookie"]
    assert fetch(cluster, "/ui", headers={**cookie, "Accept": "text/html"})[0] == 401


def test_page_is_complete_without_scripts(cluster: LiveCluster, jobs: dict[str, int]) -> None:
    """What a browser with scripts off gets (the same HTML: rendered by the server)."""
    admin = {"Authorization": f"Bearer {cluster.token('admin')}"}
    status, headers, text = fetch(cluster, "/ui", headers=admin)
    assert status == 200 and headers["Cache-Control"] == "no-store"
    for key in ("run1", "run2", "reserved", "cloud", "held"):
        assert f"<td>{jobs[key]}</td>" in text
    assert "<td>n1</td>" in text and "<td>n2</td>" in text
    assert "prov-ui-1" in text and "<td>prov</td>" in text  # the request, the lease
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and XSS not in text
    short = fetch(cluster, "/ui?rows=2", headers=admin)[2]
    assert "showing the first 2 of 3" in short  # 3 pending jobs, 2 rows per table
    assert 'href="/ui"' in text  # the Refresh link
    assert "http://" not in text and "https://" not in text  # nothing fetched from outside


def test_page_in_chromium(cluster: LiveCluster, jobs: dict[str, int], chromium: Any) -> None:
    from selenium.webdriver.common.by import By

    chromium.delete_all_cookies()
    chromium.get(cluster.url + "/ui")
    assert chromium.find_element(By.ID, "token").get_attribute("type") == "password"
    chromium.find_element(By.ID, "token").send_keys("xce_not_a_token")
    chromium.find_element(By.CSS_SELECTOR, "form button").click()
    # the click returns before the form's page has loaded: wait for it
    [error] = wait_for(lambda: chromium.find_elements(By.CLASS_NAME, "error"), 10,
                       "the sign-in error")
    assert "Unknown or revoked token" in error.text
    chromium.find_element(By.ID, "token").send_keys(cluster.token("admin"))
    chromium.find_element(By.CSS_SELECTOR, "form button").click()
    wait_for(lambda: chromium.find_elements(By.ID, "pending"), 10, "the status page")
    [cookie] = chromium.get_cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert cluster.token("admin") not in cookie["value"]
    pending = chromium.find_element(By.ID, "pending").text
    for key in ("reserved", "cloud", "held"):
        assert str(jobs[key]) in pending
    assert "Reserved: expected to start at" in pending and XSS in pending
    running = chromium.find_element(By.ID, "running").text
    assert "run-one" in running and "run-two" in running
    hosts = chromium.find_element(By.ID, "hosts").text
    assert "n1" in hosts and "n2" in hosts and "cloud" in hosts and "expected" in hosts
    assert "prov-ui-1" in chromium.find_element(By.ID, "requests").text
    assert "prov" in chromium.find_element(By.ID, "leases").text
    assert "cloud" in chromium.find_element(By.ID, "supply").text
    save_screenshot(chromium)
    # the script reloads the page (every ?refresh= seconds)
    chromium.get(cluster.url + "/ui?refresh=1")
    assert chromium.find_element(By.TAG_NAME, "body").get_attribute("data-refresh") == "1"
    assert chromium.execute_script("window.xceMark = 1; return window.xceMark") == 1
    wait_for(lambda: chromium.execute_script("return window.xceMark === undefined"), 10,
             "the page to reload itself")
    chromium.find_element(By.CSS_SELECTOR, "header form button").click()  # sign out
    wait_for(lambda: chromium.find_elements(By.ID, "token"), 10, "the sign-in form")
    assert chromium.get_cookies() == []
