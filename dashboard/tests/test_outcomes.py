"""Job outcomes in the dashboard (issue 34): the progress a running
delivery reports, a finished message's result and when it finished on its
page, RETAIN and RETAINMAX on the settings panel, and the queue page's
done tab (each finished job's result, attempts and when it finished,
newest first, paged). Every value asserted is the one the test set up, or
the one the server reports for it. Run by scripts/test-dashboard under
scripts/with-servers --cluster."""

import html
import random
from datetime import datetime, timezone

from prometheus_client.openmetrics.parser import text_string_to_metric_families
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import (Http, command_calls, get, left_the_page, no_autorefresh, q, redis_url, screenshot,
                      server_name)
from test_flow_and_schedules import shard_names

WAIT = 15


def wait(driver):
    return WebDriverWait(driver, WAIT, poll_frequency=0.1)


def path(queue="orders"):
    return f"/q/{q(server_name(redis_url()))}/{q(queue)}"


def config(r, queue):
    reply = r.execute_command("DQ.CONFIG", queue)
    it = iter(reply)
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in zip(it, it)}


def utc(ms):
    """A Unix-ms time as the dashboard writes it: 2026-11-23 23:16:05 UTC."""
    return datetime.fromtimestamp(ms // 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def finish(r, queue, results, progress=None):
    """Adds each id of `results`, takes them all, reports `progress[id]`
    where given, then ends each with DQ.DONE and its result (a plain
    DQ.ACK for None), in the order given."""
    progress = progress or {}
    pipe = r.pipeline(transaction=False)
    for id_ in results:
        pipe.execute_command("DQ.ADD", queue, f"work for {id_}", "ID", id_)
    pipe.execute()
    taken = 0
    while taken < len(results):
        got = r.execute_command("DQ.POP", queue, "COUNT", 1000, "LEASE", 600_000)
        assert got, "nothing left to take"
        taken += len(got)
    pipe = r.pipeline(transaction=False)
    for id_, value in progress.items():
        pipe.execute_command("DQ.TOUCH", queue, id_, "PROGRESS", value)
    for id_, result in results.items():
        if result is None:
            pipe.execute_command("DQ.ACK", queue, id_)
        else:
            pipe.execute_command("DQ.DONE", queue, id_, result)
    replies = pipe.execute()
    assert replies[len(progress):] == [1] * len(results)


def column_heads(browser):
    """The message table's column heads as written (the stylesheet shows
    them in capitals)."""
    return [th.get_attribute("textContent") for th in browser.find_elements(By.CSS_SELECTOR, "#messages thead th")]


def row_of(browser, id_):
    return browser.find_element(By.XPATH, f"//table[@id='messages']//tr[td[@class='id']/a[text()='{id_}']]")


def test_progress_of_running_deliveries_and_a_finished_messages_result(r, dashboard, browser):
    r.execute_command("DQ.CONFIG", "orders", "SET", "RETAIN", "1h")
    finish(r, "orders", {"paid": '{"charged":true,"amount":4200}', "acked": None, "blank": ""},
           progress={"paid": "3 of 3"})
    r.execute_command("DQ.ADD", "orders", "export", "ID", "running")
    assert r.execute_command("DQ.POP", "orders", "LEASE", 600_000)[0][0] == b"running"
    r.execute_command("DQ.TOUCH", "orders", "running", "PROGRESS", "rows 1200 of 5000")
    r.execute_command("DQ.ADD", "orders", "later", "ID", "waiting", "DELAY", "1h")
    paid = get(r, "orders", "paid")
    assert paid["state"] == b"done"

    no_autorefresh(browser, dashboard.base)
    # The inflight tab and the "all" tab show what the running delivery
    # reported; a message that runs no delivery shows none.
    for tab, heads in [
        ("?state=inflight", ["id", "payload", "attempt", "when", "progress", "last error"]),
        ("", ["id", "state", "payload", "attempt", "when", "progress", "last error"]),
    ]:
        browser.get(dashboard.url(path() + tab))
        wait(browser).until(EC.presence_of_element_located((By.ID, "messages")))
        assert column_heads(browser) == heads, tab
        assert row_of(browser, "running").find_element(By.CSS_SELECTOR, "td.progress").text == "rows 1200 of 5000"
    assert row_of(browser, "waiting").find_element(By.CSS_SELECTOR, "td.progress").text == ""
    # The "all" tab says a done message is done, and when it finished.
    row = row_of(browser, "paid")
    assert row.find_element(By.CSS_SELECTOR, "td.state").text == "done"
    cell = row.find_element(By.CSS_SELECTOR, "td.time")
    assert cell.get_attribute("title") == "finished at " + utc(int(paid["finished-at"]))
    assert cell.text.startswith("finished "), cell.text

    # Its page: the result (JSON re-indented, as a payload is), when it
    # finished, until when it is kept, and the last progress reported.
    row.find_element(By.CSS_SELECTOR, "td.id a").click()
    shown = wait(browser).until(EC.presence_of_element_located((By.ID, "result-value"))).text
    assert shown == '{\n  "charged": true,\n  "amount": 4200\n}', shown
    assert browser.find_element(By.ID, "message-state").text == "done"
    assert browser.find_element(By.ID, "finished-at").text.endswith(f"({utc(int(paid['finished-at']))})")
    assert browser.find_element(By.ID, "retained-until").text.endswith(f"({utc(int(paid['retained-until']))})")
    assert int(paid["retained-until"]) - int(paid["finished-at"]) == 3_600_000
    assert browser.find_element(By.ID, "progress").text == "3 of 3"
    screenshot(browser, "message-done")

    # A plain ACK keeps no result, and an empty result is one: each says so.
    browser.get(dashboard.url(path() + "/m/acked"))
    shown = wait(browser).until(EC.presence_of_element_located((By.ID, "result-value"))).text
    assert shown == "none: a plain DQ.ACK finished it"
    browser.get(dashboard.url(path() + "/m/blank"))
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "result-value"))).text == "(empty result)"

    # The running message's page: its progress, no result, not finished.
    browser.get(dashboard.url(path() + "/m/running"))
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "progress"))).text == "rows 1200 of 5000"
    assert not browser.find_elements(By.ID, "result-card")
    assert not browser.find_elements(By.ID, "finished-at")


def test_the_settings_panel_shows_retain_and_retainmax(r, dashboard, browser):
    r.execute_command("DQ.ADD", "orders", "a")
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(path()))
    # Untouched: the module's default, which keeps nothing.
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "retain"))).text == "not kept module"
    assert browser.find_element(By.ID, "retain-max").text == "no cap"
    c = config(r, "orders")
    assert (c["retain-ms"], c["retain-ms-from"], c["retain-max"]) == (0, b"module", None)

    r.execute_command("DQ.CONFIG", "orders", "SET", "RETAIN", "7d", "RETAINMAX", 10_000)
    browser.get(dashboard.url(path()))
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "retain"))).text == "7d 0h queue"
    assert browser.find_element(By.ID, "retain-max").text == "at most 10,000 done"
    c = config(r, "orders")
    assert (c["retain-ms"], c["retain-ms-from"], c["retain-max"]) == (604_800_000, b"queue", 10_000)
    # Shown, not set: the panel has no form.
    assert not browser.find_elements(By.CSS_SELECTOR, "#settings form, #settings input")
    screenshot(browser, "queue-settings-retain")

    # A shard of a sharded queue: its own share of the cap.
    shards = shard_names("jobs", 2)
    for s in shards:
        r.execute_command("DQ.CONFIG", s, "SET", "RETAIN", "90s", "RETAINMAX", 5)
    browser.get(dashboard.url(path(shards[1])))
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "retain"))).text == "1m 30s queue"
    assert browser.find_element(By.ID, "retain-max").text == "at most 5 done this shard's"


def done_rows(browser):
    """The done tab's rows as (id, result, attempts, finished tooltip), read
    in one script (a WebDriver call per cell took seconds a page)."""
    rows = browser.execute_script("""
        return Array.from(document.querySelectorAll('#messages tbody tr'), tr => {
            const cell = c => tr.querySelector('td.' + c);
            return [cell('id').innerText, cell('outcome').innerText, cell('attempts').innerText,
                    cell('time').getAttribute('title')];
        });""")
    return [tuple(row) for row in rows]


def newest_first(r, queue):
    """The queue's done messages as (id, finished-at), newest finished
    first and, within a millisecond, the larger id first: the order the
    done tab must show, from what DQ.SCAN STATE DONE reports."""
    cursor, entries = b"0", []
    while True:
        cursor, page = r.execute_command("DQ.SCAN", queue, cursor, "STATE", "DONE", "COUNT", 1000)
        entries += page
        if cursor == b"0":
            break
    entries.sort(key=lambda e: (e[3], e[0]), reverse=True)
    return [(e[0].decode(), int(e[3])) for e in entries]


def follow(browser, text):
    """Clicks the link `text` and waits for the page it leads to."""
    link = browser.find_element(By.LINK_TEXT, text)
    link.click()
    wait(browser).until(left_the_page(link))
    return wait(browser).until(EC.presence_of_element_located((By.ID, "done-pager")))


def test_the_done_tab_lists_results_newest_first_and_pages(r, dashboard, browser):
    r.execute_command("DQ.CONFIG", "orders", "SET", "RETAIN", "1h")
    # One job needs two attempts.
    r.execute_command("DQ.ADD", "orders", "flaky", "ID", "job-retried")
    r.execute_command("DQ.POP", "orders", "LEASE", 600_000)
    r.execute_command("DQ.NACK", "orders", "job-retried", "DELAY", 0, "ERROR", "timeout")
    assert r.execute_command("DQ.POP", "orders", "LEASE", 600_000)[0][0] == b"job-retried"
    assert r.execute_command("DQ.DONE", "orders", "job-retried", "second try") == 1
    # 60 more with results, one by a plain ACK and one with an empty
    # result, finished in an order that is not their ids' (in batches, so
    # that both ties of one millisecond and distinct times occur).
    results = {f"job-{i:02}": f"result {i}" for i in range(60)}
    results.update({"job-acked": None, "job-empty": ""})
    ids = sorted(results)
    random.Random(34).shuffle(ids)
    for at in range(0, len(ids), 10):
        finish(r, "orders", {i: results[i] for i in ids[at:at + 10]})
    results["job-retried"] = "second try"
    r.execute_command("DQ.ADD", "orders", "still waiting", "ID", "pending")
    expected = newest_first(r, "orders")
    assert len(expected) == 63

    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(path()))
    tab = wait(browser).until(EC.presence_of_element_located((By.ID, "tab-done")))
    assert tab.text == "done 63"
    assert browser.find_element(By.ID, "count-done").text == "63"
    before = command_calls(r, "dq.peek", "dq.scan")
    tab.click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "done-pager")))
    # One DQ.PEEK DONE read them all: the page says so, and it is so.
    assert command_calls(r, "dq.peek", "dq.scan") == (before[0] + 1, before[1])
    assert browser.find_element(By.ID, "done-read").text == "read with one DQ.PEEK DONE"
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-refresh") == "5"
    assert column_heads(browser) == ["id", "result", "attempts", "finished", "payload"]
    assert browser.find_element(By.ID, "done-showing").text == "1–50 of 63 done, newest first"

    def want(rows):
        shown = {None: "none (ACK)", "": "(empty)"}
        return [(i, shown.get(results[i], results[i]), "2" if i == "job-retried" else "1", "finished at " + utc(t))
                for i, t in rows]

    assert done_rows(browser) == want(expected[:50])
    screenshot(browser, "queue-done-tab")

    follow(browser, "older ›")
    assert browser.find_element(By.ID, "done-showing").text == "51–63 of 63 done, newest first"
    assert done_rows(browser) == want(expected[50:])
    assert not browser.find_elements(By.LINK_TEXT, "older ›")
    follow(browser, "‹ newer")
    assert browser.find_element(By.ID, "done-showing").text == "1–50 of 63 done, newest first"
    assert not browser.find_elements(By.LINK_TEXT, "‹ newer")

    # Next to be dropped: the earliest finished first, as DQ.PEEK says.
    browser.find_element(By.ID, "order-next").click()
    wait(browser).until(EC.url_contains("order=next"))
    peeked = [e[0].decode() for e in r.execute_command("DQ.PEEK", "orders", "DONE", "COUNT", 50)]
    assert [row[0] for row in done_rows(browser)] == peeked
    # Storage order: DQ.SCAN's pages, each row as in the newest first.
    browser.find_element(By.ID, "order-storage").click()
    wait(browser).until(EC.url_contains("order=storage"))
    rows = done_rows(browser)
    assert len(rows) == 50 and set(rows) <= set(want(expected))

    # The retried job's page: its result, on its second attempt.
    browser.get(dashboard.url(path() + "/m/job-retried"))
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "result-value"))).text == "second try"
    assert browser.find_element(By.ID, "attempt").text == "2"


def test_a_done_tab_of_more_than_one_peek_pages_by_message_and_stays_put(r, dashboard, browser):
    """1,050 done messages: more than the tab reads with one DQ.PEEK, so it
    reads every one with DQ.SCAN STATE DONE and keeps the page's 50. The
    pages are bounded by a message, so jobs finishing while one reads
    move no row from one page to another."""
    r.execute_command("DQ.CONFIG", "big", "SET", "RETAIN", "1h")
    ids = [f"m{i:04}" for i in range(1050)]
    random.Random(1050).shuffle(ids)
    for at in range(0, len(ids), 350):
        finish(r, "big", {i: f"r-{i}" for i in ids[at:at + 350]})
    expected = newest_first(r, "big")
    assert len(expected) == 1050

    no_autorefresh(browser, dashboard.base)
    before = command_calls(r, "dq.peek", "dq.scan")
    browser.get(dashboard.url(path("big") + "?state=done"))
    wait(browser).until(EC.presence_of_element_located((By.ID, "done-pager")))
    peeks, scans = (a - b for a, b in zip(command_calls(r, "dq.peek", "dq.scan"), before))
    assert peeks == 0 and scans >= 1
    assert browser.find_element(By.ID, "done-read").text == (
        f"read with {scans} DQ.SCAN STATE DONE {'call' if scans == 1 else 'calls'} (not reloaded every 5 s)")
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-refresh") == ""
    assert browser.find_element(By.ID, "done-showing").text == "1–50 of 1,050 done, newest first"
    assert [(row[0], row[1]) for row in done_rows(browser)] == [(i, f"r-{i}") for i, _ in expected[:50]]

    # Ten more finish while the first page is read: the next page down is
    # still the 50 after it, and going back up finds them above.
    finish(r, "big", {f"late-{i}": f"late {i}" for i in range(10)})
    follow(browser, "older ›")
    assert browser.find_element(By.ID, "done-showing").text == "61–110 of 1,060 done, newest first"
    assert [row[0] for row in done_rows(browser)] == [i for i, _ in expected[50:100]]
    follow(browser, "‹ newer")
    assert browser.find_element(By.ID, "done-showing").text == "11–60 of 1,060 done, newest first"
    assert [row[0] for row in done_rows(browser)] == [i for i, _ in expected[:50]]
    follow(browser, "‹ newer")
    assert browser.find_element(By.ID, "done-showing").text == "1–50 of 1,060 done, newest first"
    now = newest_first(r, "big")
    assert [row[0] for row in done_rows(browser)] == [i for i, _ in now[:50]]
    assert {i for i, _ in now[:10]} == {f"late-{i}" for i in range(10)}

    # Down every page from the newest: each done message once, in order.
    seen = [row[0] for row in done_rows(browser)]
    while browser.find_elements(By.LINK_TEXT, "older ›"):
        follow(browser, "older ›")
        seen += [row[0] for row in done_rows(browser)]
    assert seen == [i for i, _ in now]
    assert browser.find_element(By.ID, "done-showing").text == "1,051–1,060 of 1,060 done, newest first"


def test_bad_done_tab_parameters_are_refused_saying_why(r, dashboard):
    r.execute_command("DQ.CONFIG", "orders", "SET", "RETAIN", "1h")
    finish(r, "orders", {"a": "x"})
    http = Http(dashboard.base)
    assert http.get(path() + "?state=done&older=5%3Aa")[0] == 200
    for query, says in [
        ("state=done&older=x", "older must be a finished time in Unix ms"),
        ("state=done&newer=5", "newer must be a finished time in Unix ms"),
        ("state=done&older=5%3Aa&newer=5%3Aa", "give older or newer, not both"),
        ("state=ready&older=5%3Aa", "older and newer page the done tab"),
        ("state=done&order=next&older=5%3Aa", "older and newer page the done tab"),
        ("state=done&cursor=5", "cursor pages storage order"),
        ("order=newest", "order=newest is the done tab"),
        ("state=ready&order=newest", "order=newest is the done tab"),
        ("state=done&order=oldest", "order must be storage"),
    ]:
        status, body, _ = http.get(path() + "?" + query)
        assert status == 400 and says in html.unescape(body), (query, status, body[-300:])


def test_metrics_count_done_messages_and_the_ones_dropped(r, dashboard):
    # RETAINMAX 2 and three jobs finished: two kept, the earliest dropped.
    r.execute_command("DQ.CONFIG", "orders", "SET", "RETAIN", "1h", "RETAINMAX", 2)
    for id_ in ("a", "b", "c"):
        finish(r, "orders", {id_: f"result {id_}"})
    assert get(r, "orders", "a") is None and get(r, "orders", "c")["state"] == b"done"
    status, text, _ = Http(dashboard.base).get("/metrics")
    assert status == 200
    server = server_name(redis_url())
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("dq_messages", (("queue", "orders"), ("server", server), ("state", "done")))] == 2
    assert samples[("dq_server_messages", (("server", server), ("state", "done")))] == 2
    assert samples[("dq_dropped_total", (("queue", "orders"), ("server", server)))] == 1
    assert samples[("dq_server_dropped_total", (("server", server),))] == 1
    assert samples[("dq_acked_total", (("queue", "orders"), ("server", server)))] == 3
