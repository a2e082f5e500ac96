"""What the dashboard's browser tests run against: the real dq-dashboard
binary (started on a free port, stopped by its PID), the servers that
scripts/with-servers started (DQ_REDIS_URL, DQ_CLUSTER_NODES), and headless
Chromium driven through chromedriver."""

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import redis
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
if not TARGET.is_absolute():
    TARGET = ROOT / TARGET
BINARY = Path(os.environ.get("DQ_DASHBOARD_BIN", TARGET / "debug" / "dq-dashboard"))
SHOTS = TARGET / "dashboard" / "screenshots"


def redis_url():
    url = os.environ.get("DQ_REDIS_URL")
    if not url:
        # A failure, not a skip: a bare `pytest dashboard/tests` must not
        # pass with nothing tested.
        pytest.fail("DQ_REDIS_URL is not set: run the dashboard's tests with scripts/test-dashboard "
                    "(or scripts/with-servers --cluster -- python -m pytest dashboard/tests)")
    return url


def cluster_nodes():
    """The masters of scripts/with-servers' cluster (DQ_CLUSTER_NODES), as host:port."""
    nodes = os.environ.get("DQ_CLUSTER_NODES")
    if not nodes:
        pytest.fail("DQ_CLUSTER_NODES is not set: run the dashboard's tests with scripts/test-dashboard "
                    "(or scripts/with-servers --cluster -- python -m pytest dashboard/tests)")
    return nodes.split(",")


@pytest.fixture
def r():
    """The standalone server, emptied before each test."""
    client = redis.Redis.from_url(redis_url())
    client.flushall()
    yield client
    client.close()


class Dashboard:
    def __init__(self, args, env=None):
        self.log_path = Path(tempfile.mkstemp(prefix="dq-dashboard-", suffix=".log", dir="/tmp")[1])
        self.log = open(self.log_path, "wb")
        full_env = dict(os.environ)
        # The tests' own settings only: nothing from the caller's shell.
        for k in list(full_env):
            if k.startswith("DQ_DASHBOARD_") and k != "DQ_DASHBOARD_BIN":
                del full_env[k]
        full_env.update(env or {})
        if "--sample-interval" not in args:
            args = ["--sample-interval", "500ms", *args]
        self.proc = subprocess.Popen(
            [str(BINARY), "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            env=full_env,
        )
        deadline = time.monotonic() + 20
        self.base = None
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            m = re.search(r'"message":"dashboard at http://([^/"]+)/"', text)
            if m:
                self.base = f"http://{m.group(1)}"
                break
            if self.proc.poll() is not None:
                self.stop()
                self.log_path.unlink(missing_ok=True)
                raise RuntimeError(f"dq-dashboard exited {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        if self.base is None:
            self.stop()
            text = self.log_path.read_text(errors="replace")
            self.log_path.unlink(missing_ok=True)
            raise RuntimeError("dq-dashboard did not start:\n" + text)

    def url(self, path=""):
        return self.base + path

    def log_text(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


@pytest.fixture
def start_dashboard():
    """start_dashboard(*args, env=None) -> Dashboard; each stopped by PID."""
    started = []

    def start(*args, env=None):
        d = Dashboard(list(args), env)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()
        d.log_path.unlink(missing_ok=True)


@pytest.fixture
def dashboard(r, start_dashboard):
    return start_dashboard("--redis", redis_url())


@pytest.fixture(scope="session")
def browser():
    opts = Options()
    opts.binary_location = os.environ.get("DQ_CHROMIUM", "/usr/bin/chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        opts.add_argument(arg)
    service = Service(os.environ.get("DQ_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def browser_without_js():
    """Headless Chromium with JavaScript off: every page must read and act
    through plain links and forms."""
    opts = Options()
    opts.binary_location = os.environ.get("DQ_CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        opts.add_argument(arg)
    opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=Service(os.environ.get("DQ_CHROMEDRIVER", "/usr/bin/chromedriver")), options=opts)
    yield driver
    driver.quit()


def left_the_page(element):
    """A wait condition: true once `element`'s page was replaced by the next.

    Selenium's `staleness_of` raises instead when chromedriver catches the
    old node mid-navigation ("Node with given id does not belong to the
    document"), which happened on a fast machine; that, too, means the old
    page is gone."""

    def gone(_driver):
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as e:
            if "does not belong to the document" in str(e):
                return True
            raise

    return gone


def command_calls(client, *commands):
    """INFO commandstats' calls of each command (e.g. "dq.queues"), 0 for
    one never called."""
    stats = client.info("commandstats")
    return tuple(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in commands)


def screenshot(driver, name):
    """A full-page PNG under target/dashboard/screenshots/."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 20, 3000)))
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 900)
    return path


def no_autorefresh(driver, base):
    """Turn the pages' auto-refresh off, so that a page does not reload
    under a test reading it (the pages work the same without it)."""
    driver.get(base + "/static/app.js")
    driver.get(base + "/healthz")
    driver.execute_script("localStorage.setItem('dq-dashboard-refresh', 'off')")


class Http:
    """A tiny HTTP client with a cookie jar, for what a browser would not
    send (forged POSTs, missing credentials)."""

    def __init__(self, base, headers=None):
        import http.cookiejar

        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.headers = headers or {}

    def request(self, method, path, data=None, headers=None):
        body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
        h = dict(self.headers)
        h.update(headers or {})
        if body is not None:
            h.setdefault("Content-Type", "application/x-www-form-urlencoded")
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=h)
        try:
            with self.opener.open(req, timeout=20) as resp:
                return resp.status, resp.read().decode("utf-8", "replace"), {k.lower(): v for k, v in resp.headers.items()}
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace"), {k.lower(): v for k, v in e.headers.items()}

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, data, **kw):
        return self.request("POST", path, data=data, **kw)


def csrf_of(html):
    m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert m, "no CSRF token in the page"
    return m.group(1)


def stats(client, queue):
    reply = client.execute_command("DQ.STATS", queue)
    it = iter(reply)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(it, it)}


def get(client, queue, id_):
    reply = client.execute_command("DQ.GET", queue, id_)
    if reply is None:
        return None
    it = iter(reply)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(it, it)}


def server_name(url):
    p = urllib.parse.urlparse(url)
    return f"{p.hostname}:{p.port}"


def q(text):
    return urllib.parse.quote(text, safe="")


__all__ = ["json"]
