"""Schedules and flow control in the dashboard: a queue's schedules (next
and last run, Remove), its pause and limits (Pause for a while or until
resumed, Resume), the list's paused marker and limits, /metrics' series of
them, the same confirmation, CSRF and --read-only rules as every action,
and a sharded queue (docs/sharding.md) paused, resumed and listed as one.
Run by scripts/test-dashboard under scripts/with-servers --cluster."""

import datetime
import time

import pytest
import redis
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import Http, cluster_nodes, command_calls, csrf_of, no_autorefresh, q, redis_url, screenshot, server_name, stats

WAIT = 15
HOUR = 3_600_000


def wait(driver):
    return WebDriverWait(driver, WAIT, poll_frequency=0.1)


def schedules(client, queue):
    """DQ.SCHEDULES as a list of dicts, str keys, values as the server sent them."""
    out = []
    for record in client.execute_command("DQ.SCHEDULES", queue):
        it = iter(record)
        out.append({(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(it, it)})
    return out


def shown_time(ms):
    """A Unix-ms time as the pages write it: `2026-11-25 15:58:35 UTC`."""
    t = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def fill_schedules(r):
    """orders: two messages and three schedules — tick (every hour, its
    first run made at once), digest (a Berlin cron, at most 5 runs) and
    ending (every minute until an hour from now)."""
    r.execute_command("DQ.ADD", "orders", "one", "ID", "o1")
    r.execute_command("DQ.ADD", "orders", "two", "ID", "o2")
    r.execute_command("DQ.SCHEDULE", "orders", "tick", "tick!", "EVERY", "1h")
    r.execute_command("DQ.SCHEDULE", "orders", "digest", '{"digest":true}', "CRON", "0 8 * * *",
                      "TZ", "Europe/Berlin", "LIMIT", 5)
    end = int(time.time() * 1000) + HOUR
    r.execute_command("DQ.SCHEDULE", "orders", "ending", "x", "EVERY", "1m", "START", end - 30 * 60_000, "END", end)
    return end


def queue_path(queue="orders"):
    return f"/q/{q(server_name(redis_url()))}/{q(queue)}"


# --- schedules -----------------------------------------------------------------------


def test_a_queue_page_shows_its_schedules_with_next_and_last_run(r, dashboard, browser):
    end = fill_schedules(r)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(queue_path()))
    wait(browser).until(EC.presence_of_element_located((By.ID, "schedule-table")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#schedule-table tbody tr")
    assert [row.get_attribute("data-schedule") for row in rows] == ["digest", "ending", "tick"]
    server = {s["name"].decode(): s for s in schedules(r, "orders")}
    for row in rows:
        s = server[row.get_attribute("data-schedule")]
        cell = lambda css: row.find_element(By.CSS_SELECTOR, css)  # noqa: E731
        assert cell("td.spec").text == s["spec"].decode()
        assert cell("td.tz").text == s["tz"].decode()
        assert cell("td.next-run").get_attribute("title") == (shown_time(s["next-run"]) if s["next-run"] else "")
        assert cell("td.last-run").get_attribute("title") == (shown_time(s["last-run"]) if s["last-run"] else "")
        assert int(cell("td.runs").text) == s["runs"]
        assert int(cell("td.skipped").text) == s["skipped"]
    by_name = {row.get_attribute("data-schedule"): row for row in rows}
    # tick ran once, at once; digest not yet; ending starts in half an hour.
    last = by_name["tick"].find_element(By.CSS_SELECTOR, "td.last-run").text
    assert last == "now" or last.endswith(" ago"), last
    assert by_name["tick"].find_element(By.CSS_SELECTOR, "td.next-run").text.startswith("in ")
    assert by_name["digest"].find_element(By.CSS_SELECTOR, "td.last-run").text == "never"
    assert by_name["digest"].find_element(By.CSS_SELECTOR, "td.tz").text == "Europe/Berlin"
    assert by_name["digest"].find_element(By.CSS_SELECTOR, "td.limit-end").text == "0 of 5 runs"
    ending = by_name["ending"].find_element(By.CSS_SELECTOR, "td.limit-end")
    assert ending.text.startswith("ends in ")
    assert ending.find_element(By.TAG_NAME, "span").get_attribute("title") == shown_time(end)
    assert by_name["tick"].find_element(By.CSS_SELECTOR, "td.limit-end").text == "—"
    screenshot(browser, "queue-schedules")

    # A queue without schedules says so, and asks DQ.SCHEDULES nothing.
    r.execute_command("DQ.ADD", "plain", "p")
    r.config_resetstat()
    browser.get(dashboard.url(queue_path("plain")))
    assert browser.find_element(By.ID, "no-schedules").text.startswith("No schedules")
    assert command_calls(r, "dq.schedules") == (0,)


def test_removing_a_schedule_is_confirmed_and_says_what_it_did(r, dashboard, browser):
    fill_schedules(r)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(queue_path()))
    row = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, '#schedule-table tr[data-schedule="tick"]')))
    row.find_element(By.XPATH, ".//button[normalize-space()='Remove']").click()
    question = wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text
    assert question.startswith("Remove schedule tick (every 1h) of queue orders?"), question
    assert "stay in the queue" in question
    # Nothing has changed before the confirmation.
    assert "tick" in [s["name"].decode() for s in schedules(r, "orders")]
    screenshot(browser, "confirm-unschedule")
    browser.find_element(By.ID, "confirm").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert browser.find_element(By.ID, "result").text == "Removed schedule tick (DQ.UNSCHEDULE replied 1)."
    assert [s["name"].decode() for s in schedules(r, "orders")] == ["digest", "ending"]
    # The message its run made stays.
    assert stats(r, "orders")["ready"] == 3
    # Back on the queue page it is gone from the table.
    browser.find_element(By.LINK_TEXT, "Back").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "schedule-table")))
    assert [row.get_attribute("data-schedule")
            for row in browser.find_elements(By.CSS_SELECTOR, "#schedule-table tbody tr")] == ["digest", "ending"]


def test_a_schedule_already_gone_or_unknown_changes_nothing(r, dashboard):
    fill_schedules(r)
    http = Http(dashboard.base)
    path = queue_path()
    token = csrf_of(http.get(path)[1])
    origin = {"Origin": dashboard.base}
    # Unknown: no confirmation to give.
    status, body, _ = http.post(path + "/action", {"op": "unschedule", "schedule": "nope", "csrf": token}, headers=origin)
    assert status == 404 and "Unknown schedule" in body
    # No name, or one too long: a bad form.
    for bad in ({"op": "unschedule"}, {"op": "unschedule", "schedule": ""}, {"op": "unschedule", "schedule": "x" * 1008}):
        status, body, _ = http.post(path + "/action", {**bad, "csrf": token, "confirm": "yes"}, headers=origin)
        assert status == 400 and "Bad form" in body, bad
    assert len(schedules(r, "orders")) == 3
    # Confirmed after someone else removed it: the server's count says so.
    r.execute_command("DQ.UNSCHEDULE", "orders", "tick")
    status, body, _ = http.post(path + "/action", {"op": "unschedule", "schedule": "tick", "csrf": token, "confirm": "yes"},
                                headers=origin)
    assert status == 200 and "Removed no schedule (DQ.UNSCHEDULE replied 0): tick was already gone." in body


def test_schedule_names_of_any_bytes_round_trip(r, dashboard, browser):
    name = b"a/b?c#d %25\xff<i>"
    r.execute_command("DQ.SCHEDULE", "odd", name, "x", "EVERY", "1h")
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(queue_path("odd")))
    code = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#schedule-table td.sched-name code")))
    assert code.text == "a/b?c#d %25\\xff<i>"
    browser.find_element(By.XPATH, "//button[normalize-space()='Remove']").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "confirm"))).click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert schedules(r, "odd") == []


# --- pause, resume, limits -----------------------------------------------------------------


def test_the_flow_panel_shows_pause_rate_max_inflight_and_throttled(r, dashboard, browser):
    r.execute_command("DQ.ADD", "orders", "a")
    r.execute_command("DQ.ADD", "orders", "b")
    r.execute_command("DQ.CONFIG", "orders", "SET", "RATE", "100/1s", "MAXINFLIGHT", 20)
    r.execute_command("DQ.PAUSE", "orders", "FOR", HOUR)
    # A POP on the paused queue delivers nothing: throttled.
    assert not r.execute_command("DQ.POP", "orders")
    s = stats(r, "orders")
    assert s["throttled"] == 1 and s["paused"] == 1
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(queue_path()))
    panel = wait(browser).until(EC.presence_of_element_located((By.ID, "flow")))
    paused = browser.find_element(By.ID, "paused").text
    assert paused.startswith("paused until " + shown_time(s["paused-until"])), paused
    assert browser.find_element(By.ID, "rate").text == "100/1s at most 100 deliveries in any 1s (RATE)"
    assert browser.find_element(By.ID, "max-inflight").text == "20 (0 in flight now)"
    assert browser.find_element(By.ID, "throttled").text.startswith("1 ")
    assert panel.find_element(By.ID, "pause-button").text == "Pause"
    assert panel.find_elements(By.XPATH, ".//button[normalize-space()='Resume']")
    screenshot(browser, "queue-flow")

    # Until resumed, and no limits: said so.
    r.execute_command("DQ.PAUSE", "orders")
    r.execute_command("DQ.CONFIG", "orders", "SET", "RATE", 0, "MAXINFLIGHT", 0)
    browser.refresh()
    assert browser.find_element(By.ID, "paused").text == "paused until resumed"
    assert browser.find_element(By.ID, "rate").text == "none"
    assert browser.find_element(By.ID, "max-inflight").text == "none"
    # Not paused: no Resume button.
    r.execute_command("DQ.RESUME", "orders")
    browser.refresh()
    assert browser.find_element(By.ID, "paused").text == "no"
    assert not browser.find_elements(By.XPATH, "//button[normalize-space()='Resume']")


def test_pause_for_a_while_and_resume_are_confirmed(r, dashboard, browser):
    r.execute_command("DQ.ADD", "orders", "a")
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(queue_path()))
    box = wait(browser).until(EC.presence_of_element_located((By.ID, "pause-for")))
    box.send_keys("10m")
    browser.find_element(By.ID, "pause-button").click()
    question = wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text
    assert question.startswith("Pause queue orders for 10m? POP delivers nothing from it until then"), question
    assert stats(r, "orders")["paused"] == 0, "nothing before the confirmation"
    before = int(time.time() * 1000)
    browser.find_element(By.ID, "confirm").click()
    result = wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text
    after = int(time.time() * 1000)
    assert result.startswith("Paused queue orders for 10m, until ") and result.endswith("(DQ.PAUSE replied OK)."), result
    s = stats(r, "orders")
    assert s["paused"] == 1
    assert before + 600_000 <= s["paused-until"] <= after + 600_000
    assert not r.execute_command("DQ.POP", "orders"), "paused: POP delivers nothing"

    browser.find_element(By.LINK_TEXT, "Back").click()
    wait(browser).until(EC.presence_of_element_located((By.XPATH, "//button[normalize-space()='Resume']"))).click()
    question = wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text
    assert question.startswith("Resume queue orders?"), question
    assert stats(r, "orders")["paused"] == 1
    browser.find_element(By.ID, "confirm").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert browser.find_element(By.ID, "result").text == "Resumed queue orders (DQ.RESUME replied 1)."
    assert stats(r, "orders")["paused"] == 0
    assert r.execute_command("DQ.POP", "orders"), "resumed: POP delivers again"

    # An empty length: until resumed.
    browser.get(dashboard.url(queue_path()))
    wait(browser).until(EC.presence_of_element_located((By.ID, "pause-button"))).click()
    assert "Pause queue orders until resumed?" in wait(browser).until(
        EC.presence_of_element_located((By.ID, "question"))).text
    browser.find_element(By.ID, "confirm").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert browser.find_element(By.ID, "result").text == "Paused queue orders until resumed (DQ.PAUSE replied OK)."
    s = stats(r, "orders")
    assert s["paused"] == 1 and s["paused-until"] is None


def test_a_bad_pause_length_changes_nothing(r, dashboard):
    r.execute_command("DQ.ADD", "orders", "a")
    http = Http(dashboard.base)
    path = queue_path()
    token = csrf_of(http.get(path)[1])
    for bad in ("soon", "0", "-5", "10 parsecs", "99999999999999999999"):
        for confirm in ("", "yes"):
            status, body, _ = http.post(path + "/action", {"op": "pause", "for": bad, "csrf": token, "confirm": confirm},
                                        headers={"Origin": dashboard.base})
            assert status == 400 and "Bad pause length" in body, (bad, status, body[-400:])
    assert stats(r, "orders")["paused"] == 0
    # A bare number is milliseconds, as DQ.PAUSE FOR takes.
    status, body, _ = http.post(path + "/action", {"op": "pause", "for": "90000", "csrf": token, "confirm": "yes"},
                                headers={"Origin": dashboard.base})
    assert status == 200 and "Paused queue orders for 1m 30s" in body
    assert stats(r, "orders")["paused"] == 1
    # Resuming a queue that is not paused says so.
    r.execute_command("DQ.RESUME", "orders")
    status, body, _ = http.post(path + "/action", {"op": "resume", "csrf": token, "confirm": "yes"},
                                headers={"Origin": dashboard.base})
    assert status == 200 and "Queue orders was not paused (DQ.RESUME replied 0)." in body


# --- the same rules as every action ----------------------------------------------------------


def test_read_only_shows_the_panel_and_schedules_but_no_action_and_refuses_them(r, start_dashboard, browser):
    fill_schedules(r)
    r.execute_command("DQ.PAUSE", "orders")
    d = start_dashboard("--redis", redis_url(), "--read-only")
    no_autorefresh(browser, d.base)
    browser.get(d.url(queue_path()))
    wait(browser).until(EC.presence_of_element_located((By.ID, "schedule-table")))
    assert browser.find_element(By.ID, "paused").text == "paused until resumed"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#schedule-table tbody tr")) == 3
    assert not browser.find_elements(By.TAG_NAME, "form")
    assert not browser.find_elements(By.TAG_NAME, "button")
    assert not browser.find_elements(By.ID, "pause-for")
    http = Http(d.base)
    http.get(queue_path())
    for form in ({"op": "pause"}, {"op": "pause", "for": "1m"}, {"op": "resume"}, {"op": "unschedule", "schedule": "tick"}):
        status, body, _ = http.post(queue_path() + "/action", {**form, "confirm": "yes", "csrf": "x"},
                                    headers={"Origin": d.base})
        assert status == 403 and "read-only" in body, form
    s = stats(r, "orders")
    assert s["paused"] == 1 and s["paused-until"] is None
    assert len(schedules(r, "orders")) == 3


def test_csrf_and_origin_guard_pause_resume_and_unschedule(r, dashboard):
    fill_schedules(r)
    path = queue_path()
    http = Http(dashboard.base)
    token = csrf_of(http.get(path)[1])
    for form in ({"op": "pause", "for": "1m"}, {"op": "unschedule", "schedule": "tick"}, {"op": "resume"}):
        form = {**form, "confirm": "yes"}
        # No token, a wrong token, a token without its cookie, a foreign origin.
        assert http.post(path + "/action", form)[0] == 403, form
        assert http.post(path + "/action", {**form, "csrf": "0" * 64})[0] == 403, form
        assert Http(dashboard.base).post(path + "/action", {**form, "csrf": token})[0] == 403, form
        assert http.post(path + "/action", {**form, "csrf": token}, headers={"Origin": "http://evil.example"})[0] == 403
        # GET never acts.
        assert http.get(path + "/action?" + "&".join(f"{k}={v}" for k, v in form.items()))[0] == 405
        s = stats(r, "orders")
        assert s["paused"] == 0 and len(schedules(r, "orders")) == 3, form
    # Right token, right origin: done.
    status, body, _ = http.post(path + "/action", {"op": "pause", "csrf": token, "confirm": "yes"},
                                headers={"Origin": dashboard.base})
    assert status == 200 and stats(r, "orders")["paused"] == 1


# --- the list ------------------------------------------------------------------------------


def test_the_list_marks_paused_queues_and_shows_limits_from_one_call(r, start_dashboard, browser):
    r.execute_command("DQ.ADD", "a-paused", "x")
    r.execute_command("DQ.PAUSE", "a-paused", "FOR", HOUR)
    r.execute_command("DQ.CONFIG", "a-paused", "SET", "RATE", "5000/1h")
    r.execute_command("DQ.ADD", "b-limited", "x")
    r.execute_command("DQ.CONFIG", "b-limited", "SET", "MAXINFLIGHT", 7, "RATE", "10/1500ms")
    r.execute_command("DQ.SCHEDULE", "b-limited", "s1", "x", "EVERY", "1h")
    r.execute_command("DQ.SCHEDULE", "b-limited", "s2", "x", "EVERY", "2h")
    r.execute_command("DQ.ADD", "c-plain", "x")
    r.execute_command("DQ.PAUSE", "d-paused")  # made by DQ.PAUSE itself, empty
    d = start_dashboard("--redis", redis_url())
    no_autorefresh(browser, d.base)
    r.config_resetstat()
    browser.get(d.url("/"))
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#queues tbody tr")))
    # The fields come with DQ.QUEUES WITHSTATS: no DQ.STATS, no DQ.SCHEDULES.
    assert command_calls(r, "dq.stats", "dq.schedules") == (0, 0)
    rows = {row.get_attribute("data-queue"): row for row in browser.find_elements(By.CSS_SELECTOR, "#queues tbody tr")}
    assert list(rows) == ["a-paused", "b-limited", "c-plain", "d-paused"]

    def badges(name):
        return [b.text for b in rows[name].find_elements(By.CSS_SELECTOR, "td.name .badge")]

    def limits(name):
        return rows[name].find_element(By.CSS_SELECTOR, "td.limits").text.splitlines()

    assert badges("a-paused") == ["paused"]
    assert badges("b-limited") == ["2 schedules"]
    assert badges("c-plain") == []
    assert badges("d-paused") == ["paused"]
    assert limits("a-paused") == ["5000/1h"]
    assert limits("b-limited") == ["10/1500ms", "≤7 in flight"]
    assert limits("c-plain") == ["—"]
    until = stats(r, "a-paused")["paused-until"]
    assert shown_time(until) in rows["a-paused"].find_element(By.CSS_SELECTOR, ".badge").get_attribute("title")
    assert browser.find_element(By.ID, "total-paused").text == "2"
    screenshot(browser, "queue-list-flow")

    # The "paused" chip shows the paused queues only; again, all of them.
    browser.find_element(By.ID, "only-paused").click()
    wait(browser).until(EC.url_contains("paused=1"))
    assert [row.get_attribute("data-queue") for row in browser.find_elements(By.CSS_SELECTOR, "#queues tbody tr")] == [
        "a-paused", "d-paused"]
    assert browser.find_element(By.ID, "total-queues").text == "2"
    browser.find_element(By.ID, "only-paused").click()
    wait(browser).until(lambda b: "paused=1" not in b.current_url)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#queues tbody tr")) == 4
    assert Http(d.base).get("/?paused=maybe")[0] == 400


# --- /metrics --------------------------------------------------------------------------------


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(fams, family, **labels):
    found = [
        s.value
        for s in fams[family].samples
        if all(s.labels.get(k) == v for k, v in labels.items()) and not s.name.endswith("_created")
    ]
    assert len(found) == 1, (family, labels, found)
    return found[0]


def absent(fams, family, **labels):
    return not any(all(s.labels.get(k) == v for k, v in labels.items()) for s in fams[family].samples)


def test_metrics_export_pause_limits_schedules_and_throttled(r, start_dashboard):
    r.execute_command("DQ.ADD", "orders", "x")
    r.execute_command("DQ.PAUSE", "orders", "FOR", HOUR)
    r.execute_command("DQ.CONFIG", "orders", "SET", "RATE", "5000/1h", "MAXINFLIGHT", 20)
    r.execute_command("DQ.SCHEDULE", "orders", "tick", "x", "EVERY", "1h")
    r.execute_command("DQ.SCHEDULE", "orders", "tock", "x", "EVERY", "2h")
    assert not r.execute_command("DQ.POP", "orders")
    assert not r.execute_command("DQ.POP", "orders")
    r.execute_command("DQ.ADD", "emails", "x")
    r.execute_command("DQ.PAUSE", "emails")
    assert not r.execute_command("DQ.POP", "emails")
    r.execute_command("DQ.ADD", "plain", "x")
    d = start_dashboard("--redis", redis_url())
    server = server_name(redis_url())
    runs_before = r.info("dq")["dq_schedule_runs"]
    status, text, _ = Http(d.base).get("/metrics")
    assert status == 200
    runs_after = r.info("dq")["dq_schedule_runs"]
    fams = families(text)
    o, e, p = (stats(r, n) for n in ("orders", "emails", "plain"))
    assert value(fams, "dq_paused", server=server, queue="orders") == 1
    assert value(fams, "dq_paused", server=server, queue="emails") == 1
    assert value(fams, "dq_paused", server=server, queue="plain") == 0
    assert value(fams, "dq_paused_until_timestamp_seconds", server=server, queue="orders") == o["paused-until"] / 1000
    assert absent(fams, "dq_paused_until_timestamp_seconds", queue="emails"), "until resumed: no end"
    assert value(fams, "dq_rate_limit_deliveries", server=server, queue="orders") == 5000
    assert value(fams, "dq_rate_limit_window_seconds", server=server, queue="orders") == 3600
    assert value(fams, "dq_max_inflight", server=server, queue="orders") == 20
    for family in ("dq_rate_limit_deliveries", "dq_rate_limit_window_seconds", "dq_max_inflight"):
        assert absent(fams, family, queue="plain"), family
    assert value(fams, "dq_schedules", server=server, queue="orders") == 2
    assert value(fams, "dq_schedules", server=server, queue="plain") == 0
    assert value(fams, "dq_throttled", server=server, queue="orders") == o["throttled"] == 2
    assert value(fams, "dq_throttled", server=server, queue="emails") == e["throttled"] == 1
    assert value(fams, "dq_throttled", server=server, queue="plain") == p["throttled"] == 0
    assert fams["dq_throttled"].type == "counter"
    assert fams["dq_paused"].type == "gauge"
    # Per-server totals.
    assert value(fams, "dq_server_queues_paused", server=server) == 2
    assert value(fams, "dq_server_throttled", server=server) == 3
    assert value(fams, "dq_server_schedules", server=server) == 2
    # The module's count since it loaded (other tests' runs included).
    assert runs_before <= value(fams, "dq_schedule_runs", server=server) <= runs_after
    for family in ("dq_paused", "dq_rate_limit_deliveries", "dq_max_inflight", "dq_schedules", "dq_throttled",
                   "dq_server_queues_paused", "dq_server_throttled"):
        assert f"# HELP {family} " in text and f"# TYPE {family} " in text, family

    # The queues' own series follow --metrics-queues; the totals do not.
    d = start_dashboard("--redis", redis_url(), "--metrics-queues", "plain")
    fams = families(Http(d.base).get("/metrics")[1])
    assert absent(fams, "dq_paused", queue="orders") and absent(fams, "dq_throttled", queue="orders")
    assert value(fams, "dq_paused", server=server, queue="plain") == 0
    assert value(fams, "dq_server_queues_paused", server=server) == 2
    assert value(fams, "dq_server_throttled", server=server) == 3


# --- a sharded queue (docs/sharding.md) --------------------------------------------------------


def crc16(data):
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def shard_names(queue, shards):
    """The shard names docs/sharding.md fixes (scripts/sharding-vectors is
    the reference)."""
    width = 16384 // shards
    names = []
    for i in range(shards):
        k = 0
        while not (i * width <= crc16(b"%s~%dof%d~%d" % (queue.encode(), i, shards, k)) % 16384 < (i + 1) * width):
            k += 1
        names.append(f"{queue}~{i}of{shards}~{k}")
    return names


class Cluster:
    """A command on the master holding its key (tried on each in turn:
    the others answer MOVED)."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.clients = [redis.Redis(host=n.split(":")[0], port=int(n.split(":")[1])) for n in nodes]

    def flushall(self):
        for c in self.clients:
            c.flushall()

    def node_of(self, key):
        for node, c in zip(self.nodes, self.clients):
            try:
                c.execute_command("DQ.STATS", key)
                return node
            except redis.exceptions.MovedError:
                continue
        raise AssertionError(f"no master holds {key}")

    def __call__(self, *args):
        return self.client(args[1]).execute_command(*args)

    def client(self, key):
        return self.clients[self.nodes.index(self.node_of(key))]

    def close(self):
        for c in self.clients:
            c.close()


def test_a_sharded_queue_is_paused_resumed_and_scheduled_as_one(start_dashboard, browser):
    cluster = Cluster(cluster_nodes())
    cluster.flushall()
    try:
        names = shard_names("jobs", 4)
        homes = [cluster.node_of(n) for n in names]
        assert len(set(homes)) >= 2, "the shards spread over the masters"
        # Shards 0 to 2 hold a message; shard 3 was never used (no key yet).
        for n in names[:3]:
            cluster("DQ.ADD", n, "work")
        # A schedule lives on one shard (the libraries place it by name).
        cluster("DQ.SCHEDULE", names[1], "nightly", "x", "CRON", "0 3 * * *")
        cluster("DQ.SCHEDULE", names[2], "hourly", "x", "EVERY", "1h")
        d = start_dashboard("--redis", f"redis://{cluster.nodes[0]}")
        no_autorefresh(browser, d.base)
        page = f"/q/{q(homes[0])}/{q(names[0])}"
        browser.get(d.url(page))
        note = wait(browser).until(EC.presence_of_element_located((By.ID, "shard-note"))).text
        assert note.startswith("Shard 0 of the 4 shards of sharded queue jobs"), note
        assert browser.find_element(By.ID, "shards").text.startswith("3 of 4 exist")
        assert browser.find_element(By.ID, "paused").text == "none of 4"
        # Every shard's schedules, each with the shard holding it.
        rows = browser.find_elements(By.CSS_SELECTOR, "#schedule-table tbody tr")
        assert [(row.get_attribute("data-schedule"), row.find_element(By.CSS_SELECTOR, "td.shard").text)
                for row in rows] == [("hourly", names[2]), ("nightly", names[1])]
        screenshot(browser, "sharded-queue")

        # Pause all four, the unused one too (a message routed there later
        # must not be delivered either).
        browser.find_element(By.ID, "pause-button").click()
        question = wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text
        assert question.startswith("Pause all 4 shards of sharded queue jobs until resumed?"), question
        assert browser.find_element(By.ID, "confirm").text == "Yes, pause all 4"
        assert all(stats(cluster.client(n), n)["paused"] == 0 for n in names)
        browser.find_element(By.ID, "confirm").click()
        result = wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text
        assert result == "Paused all 4 shards of sharded queue jobs until resumed (DQ.PAUSE replied OK on each)."
        for n in names:
            assert stats(cluster.client(n), n)["paused"] == 1, n
        # Limits split over the shards (as the libraries set them) add up.
        for n in names:
            cluster("DQ.CONFIG", n, "SET", "RATE", "25/1s", "MAXINFLIGHT", 5)
        cluster("DQ.CONFIG", names[3], "SET", "MAXINFLIGHT", 0)
        browser.get(d.url(page))
        assert browser.find_element(By.ID, "paused").text == "paused 4 of 4 shards until resumed"
        assert browser.find_element(By.ID, "shards").text == "4 of 4 exist"
        assert browser.find_element(By.ID, "rate").text == "25/1s on each of the 4 shards (100/1s in all)"
        assert browser.find_element(By.ID, "max-inflight").text == "5 on 3 shards"

        # Resume all from another shard's page.
        browser.get(d.url(f"/q/{q(homes[2])}/{q(names[2])}"))
        wait(browser).until(EC.presence_of_element_located((By.XPATH, "//button[normalize-space()='Resume all 4 shards']"))).click()
        assert wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text.startswith(
            "Resume all 4 shards of sharded queue jobs?")
        browser.find_element(By.ID, "confirm").click()
        result = wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text
        assert result == "Resumed all 4 shards of sharded queue jobs: 4 were paused (DQ.RESUME replied 1 on 4, 0 on 0)."
        for n in names:
            assert stats(cluster.client(n), n)["paused"] == 0, n

        # Remove a schedule held by another shard, from shard 0's page.
        browser.get(d.url(page))
        row = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-schedule="nightly"]')))
        row.find_element(By.XPATH, ".//button[normalize-space()='Remove']").click()
        wait(browser).until(EC.presence_of_element_located((By.ID, "confirm"))).click()
        wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
        assert browser.find_element(By.ID, "result").text == "Removed schedule nightly (DQ.UNSCHEDULE replied 1)."
        assert schedules(cluster.client(names[1]), names[1]) == []
        assert len(schedules(cluster.client(names[2]), names[2])) == 1

        # A name shaped like a shard's but not the libraries' is a queue of
        # its own: no shard note, pause acts on it alone.
        k = int(names[0].rsplit("~", 1)[1]) + 1
        lookalike = f"jobs~0of4~{k}"
        cluster("DQ.ADD", lookalike, "x")
        browser.get(d.url(f"/q/{q(cluster.node_of(lookalike))}/{q(lookalike)}"))
        wait(browser).until(EC.presence_of_element_located((By.ID, "flow")))
        assert not browser.find_elements(By.ID, "shard-note")
        assert browser.find_element(By.ID, "pause-button").text == "Pause"
    finally:
        cluster.close()
