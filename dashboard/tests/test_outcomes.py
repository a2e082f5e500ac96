"""Job outcomes in the dashboard (issue 34): the progress a running
delivery reports, a finished message's result and when it finished on its
page, RETAIN and RETAINMAX on the settings panel, and the queue page's
done tab (each finished job's result, attempts and when it finished,
newest first, paged). Every value asserted is the one the test set up, or
the one the server reports for it. Run by scripts/test-dashboard under
scripts/with-servers --cluster."""

from datetime import datetime, timezone

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import get, no_autorefresh, q, redis_url, screenshot, server_name
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
