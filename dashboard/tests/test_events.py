"""The event log in the dashboard (issue 35): a queue's live feed of events
(newest first, filtered by type, reloaded as new ones come, paged older),
what it says when the queue keeps none and when the events a page asks for
were trimmed (GAP), and on a message's page the history of that id's
events. Every value asserted is one the test set up, or the one DQ.EVENTS
reports for it. Run by scripts/test-dashboard under scripts/with-servers
--cluster."""

from datetime import datetime, timezone

from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import Http, no_autorefresh, q, redis_url, screenshot, server_name

WAIT = 15


def wait(driver, seconds=WAIT):
    # A page reloading under a check (auto-refresh) leaves its elements
    # stale: the check runs again on the new page.
    return WebDriverWait(driver, seconds, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,))


def path(queue):
    return f"/q/{q(server_name(redis_url()))}/{q(queue)}"


def utc(ms):
    return datetime.fromtimestamp(ms // 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def server_events(r, queue, *args):
    """DQ.EVENTS as (last-seq, {seq: (at, type, id, attempt, detail)})."""
    last, events = r.execute_command("DQ.EVENTS", queue, *args)
    return last, {e[0]: (e[1], text(e[2]), text(e[3]), e[4], text(e[5])) for e in events}


def rows(browser, table="events"):
    """Each row of an event table as (seq, type, id, attempt, detail); the
    history's rows have no id column (None)."""
    out = []
    for tr in browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr"):
        ids = tr.find_elements(By.CSS_SELECTOR, "td.id")
        out.append((
            int(tr.get_attribute("data-seq")),
            tr.find_element(By.CSS_SELECTOR, "td.type").text,
            ids[0].text if ids else None,
            tr.find_element(By.CSS_SELECTOR, "td.attempt").text,
            tr.find_element(By.CSS_SELECTOR, "td.detail").text,
        ))
    return out


def test_the_feed_shows_events_newest_first_by_type_live_and_a_messages_history(r, dashboard, browser):
    r.execute_command("DQ.CONFIG", "orders", "SET", "EVENTS", 100)
    r.execute_command("DQ.ADD", "orders", "x", "ID", "a")
    r.execute_command("DQ.ADD", "orders", "x", "ID", "b")
    assert [e[0] for e in r.execute_command("DQ.POP", "orders", "COUNT", 2, "LEASE", 600_000)] == [b"a", b"b"]
    assert r.execute_command("DQ.ACK", "orders", "a") == 1
    assert r.execute_command("DQ.NACK", "orders", "b", "DEAD", "ERROR", "HTTP 410") == b"dead"
    last, events = server_events(r, "orders")
    assert last == 6

    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(path("orders")))
    assert browser.find_element(By.ID, "events-setting").text.startswith("the last 100")
    browser.find_element(By.ID, "events-link").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "events")))
    assert rows(browser) == [
        (6, "dead", "b", "1", "permanent"),
        (5, "done", "a", "1", ""),
        (4, "delivered", "b", "1", ""),
        (3, "delivered", "a", "1", ""),
        (2, "added", "b", "", ""),
        (1, "added", "a", "", ""),
    ]
    # Each row's time is the event's own (its tooltip, in UTC).
    for tr in browser.find_elements(By.CSS_SELECTOR, "#events tbody tr"):
        at = events[int(tr.get_attribute("data-seq"))][0]
        assert tr.find_element(By.CSS_SELECTOR, "td.time").get_attribute("title") == utc(at)
    assert browser.find_element(By.ID, "events-kept").text == "Keeps its last 100 events; holds #1 to #6."
    screenshot(browser, "events-feed")

    # Filtered by type: only the deaths, with their reason.
    browser.find_element(By.CSS_SELECTOR, "#event-types a[data-type='dead']").click()
    wait(browser).until(EC.url_contains("type=dead"))
    assert rows(browser) == [(6, "dead", "b", "1", "permanent")]
    browser.find_element(By.CSS_SELECTOR, "#event-types a[data-type='progress']").click()
    wait(browser).until(EC.url_contains("type=progress"))
    assert browser.find_element(By.ID, "no-events").text == "None of type progress among these 6."

    # Live: with auto-refresh on, an event written after the page loaded
    # shows up by itself, on top.
    browser.execute_script("localStorage.setItem('dq-dashboard-refresh', 'on')")
    try:
        browser.get(dashboard.url(path("orders") + "/events"))
        wait(browser).until(EC.presence_of_element_located((By.ID, "events")))
        r.execute_command("DQ.ADD", "orders", "y", "ID", "c")
        # The page reloads itself meanwhile: a read that lands mid-reload
        # fails in the driver (a stale row, or "unhandled inspector error"),
        # so any driver error here means "look again".
        reloading = WebDriverWait(browser, WAIT, poll_frequency=0.1, ignored_exceptions=(WebDriverException,))
        reloading.until(lambda d: rows(d)[:1] == [(7, "added", "c", "", "")])
    finally:
        browser.execute_script("localStorage.setItem('dq-dashboard-refresh', 'off')")

    # A message's page: the history of its id, oldest first.
    browser.get(dashboard.url(path("orders") + "/events"))
    wait(browser).until(EC.presence_of_element_located((By.ID, "events")))
    browser.find_element(By.XPATH, "//table[@id='events']//tr[@data-seq='6']//td[@class='id']/a").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "history-events")))
    assert browser.find_element(By.ID, "message-id").text == "b"
    assert rows(browser, "history-events") == [
        (2, "added", None, "", ""),
        (4, "delivered", None, "1", ""),
        (6, "dead", None, "1", "permanent"),
    ]
    assert not browser.find_elements(By.ID, "history-trimmed"), "the log reaches back to #1"
    screenshot(browser, "message-history")


def test_a_queue_without_events_says_how_to_turn_them_on_and_a_trimmed_page_says_gap(r, dashboard, browser):
    no_autorefresh(browser, dashboard.base)
    r.execute_command("DQ.ADD", "plain", "x", "ID", "p")
    browser.get(dashboard.url(path("plain")))
    assert browser.find_element(By.ID, "events-setting").text.startswith("none kept")
    browser.get(dashboard.url(path("plain") + "/events"))
    off = browser.find_element(By.ID, "events-off").text
    assert off == ("This queue keeps no events (EVENTS is 0, the default). Turn it on with "
                   "DQ.CONFIG plain SET EVENTS 10000 (keeps the queue's last 10,000 events; any n up to "
                   "100,000,000)."), off
    assert not browser.find_elements(By.ID, "events")
    browser.get(dashboard.url(path("plain") + "/m/p"))
    assert browser.find_element(By.ID, "history-off").text.startswith(
        "The queue keeps no events, so this message has no history here. Turn it on with DQ.CONFIG plain SET EVENTS")

    # 2,500 events kept 1,500 at a time: the newest page reads the newest
    # 1,000 (#1501 to #2500) and shows 100; its "older" link asks before
    # #1501.
    r.execute_command("DQ.CONFIG", "bulk", "SET", "EVENTS", 1500)
    pipe = r.pipeline(transaction=False)
    for i in range(2500):
        pipe.execute_command("DQ.ADD", "bulk", "x", "ID", f"m{i}")
    pipe.execute()
    assert server_events(r, "bulk", "COUNT", 1)[1].keys() == {1001}
    browser.get(dashboard.url(path("bulk") + "/events"))
    shown = rows(browser)
    assert [s[0] for s in shown] == list(range(2500, 2400, -1))
    assert shown[0] == (2500, "added", "m2499", "", "")
    assert browser.find_element(By.ID, "events-kept").text == "Keeps its last 1,500 events; holds #1001 to #2500."
    assert not browser.find_elements(By.ID, "events-gap")
    older = browser.find_element(By.ID, "events-older")
    assert older.get_attribute("href").endswith("/events?before=1501")
    # Meanwhile 600 more events trim the log to #1601 on: the older page
    # asks for what is gone, and says so plainly instead of skipping it.
    pipe = r.pipeline(transaction=False)
    for i in range(600):
        pipe.execute_command("DQ.ADD", "bulk", "x", "ID", f"n{i}")
    pipe.execute()
    older.click()
    gap = wait(browser).until(EC.presence_of_element_located((By.ID, "events-gap"))).text
    assert gap == ("Events before #1601 are gone: the queue keeps only its last 1,500 events, and older "
                   "ones were trimmed (DQ.EVENTS replied GAP). The oldest kept is #1601."), gap
    assert browser.find_element(By.ID, "no-events").text == "None of the events of this page is kept: see the newest."
    screenshot(browser, "events-gap")
    browser.find_element(By.ID, "events-newest").click()
    wait(browser).until(lambda d: rows(d)[:1] == [(3100, "added", "n599", "", "")])

    # A message whose events were trimmed: its page says the history may
    # be missing the older ones.
    browser.get(dashboard.url(path("bulk") + "/m/m0"))
    assert browser.find_element(By.ID, "history-none").text == "No event of this message is kept."
    assert browser.find_element(By.ID, "history-trimmed").text == (
        "From #1601 on: the log keeps its last 1,500 events and earlier ones were trimmed, so older "
        "events of this message may be missing.")
    browser.get(dashboard.url(path("bulk") + "/m/n5"))
    assert rows(browser, "history-events") == [(2506, "added", None, "", "")]

    # Bad parameters are named, with what is allowed.
    http = Http(dashboard.base)
    status, body, _ = http.get(path("bulk") + "/events?type=finished")
    assert status == 400 and "finished" in body and "is not an event type: use added, replaced" in body, body
    status, body, _ = http.get(path("bulk") + "/events?before=0")
    assert status == 400 and "before must be a seq" in body, body
    status, _, _ = http.get(path("nothing") + "/events")
    assert status == 404
