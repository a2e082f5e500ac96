"""The real dq-dashboard binary against real servers, read by headless
Chromium (pages, clicks) and by plain HTTP (what a browser would not send).
Run by scripts/test-dashboard under scripts/with-servers --cluster."""

import re
import socket
import time

import pytest
import redis
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import (
    Http,
    cluster_nodes,
    csrf_of,
    get,
    left_the_page,
    no_autorefresh,
    q,
    redis_url,
    screenshot,
    server_name,
    stats,
)

WAIT = 15


def wait(driver):
    return WebDriverWait(driver, WAIT, poll_frequency=0.1)


def fill(r):
    """orders: 2 ready, 1 delayed, 1 in flight, 1 dead (with an error);
    emails: 3 ready."""
    for i in range(2):
        r.execute_command("DQ.ADD", "orders", f'{{"order":{i},"items":[1,2]}}', "ID", f"o{i}")
    r.execute_command("DQ.ADD", "orders", "later", "DELAY", 3_600_000, "ID", "later")
    r.execute_command("DQ.ADD", "orders", '{"order":"bad"}', "ID", "bad", "PRIORITY", 10)
    r.execute_command("DQ.ADD", "orders", "busy", "ID", "busy", "PRIORITY", 5)
    popped = r.execute_command("DQ.POP", "orders", "COUNT", 2, "LEASE", 600_000)
    assert [e[0] for e in popped] == [b"bad", b"busy"]
    assert r.execute_command("DQ.NACK", "orders", "bad", "DEAD", "ERROR", "HTTP 410 Gone: order was deleted") == b"dead"
    for i in range(3):
        r.execute_command("DQ.ADD", "emails", f"mail {i}")


# --- reading ---------------------------------------------------------------------


def test_queue_list_shows_the_counts_the_server_reports(r, dashboard, browser):
    fill(r)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url("/"))
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#queues tbody tr")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#queues tbody tr")
    assert [row.get_attribute("data-queue") for row in rows] == ["emails", "orders"]
    for row in rows:
        queue = row.get_attribute("data-queue")
        s = stats(r, queue)
        for state in ("delayed", "ready", "inflight", "dead"):
            cell = row.find_element(By.CSS_SELECTOR, f'td[data-state="{state}"]')
            assert int(cell.text.replace(",", "")) == s[state], (queue, state)
    assert browser.find_element(By.ID, "total-ready").text == str(stats(r, "orders")["ready"] + 3)
    # The charts fill as the sampler runs (every 500 ms here).
    wait(browser).until(lambda d: (d.refresh(), not d.find_elements(By.CSS_SELECTOR, "text.empty"))[1])
    screenshot(browser, "queue-list")


def test_queue_page_settings_states_and_paging(r, dashboard, browser):
    fill(r)
    r.execute_command("DQ.CONFIG", "orders", "SET", "MAXATTEMPTS", 7, "BACKOFF", "fixed:30s")
    for i in range(120):
        r.execute_command("DQ.ADD", "orders", f"bulk {i}", "ID", f"bulk-{i:03}")
    no_autorefresh(browser, dashboard.base)
    base = dashboard.url(f"/q/{q(server_name(redis_url()))}/orders")
    browser.get(base)
    wait(browser).until(EC.presence_of_element_located((By.ID, "messages")))
    s = stats(r, "orders")
    for state in ("delayed", "ready", "inflight", "dead"):
        assert int(browser.find_element(By.ID, f"count-{state}").text.replace(",", "")) == s[state]
    settings = browser.find_element(By.CSS_SELECTOR, ".settings").text
    assert "7" in settings and "fixed:30s" in settings and "queue" in settings
    screenshot(browser, "queue")

    # Every ready message, page after page (DQ.SCAN cursors), once each.
    browser.get(base + "?state=ready")
    seen = []
    for _ in range(20):
        seen += [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#messages td.id a")]
        nxt = browser.find_elements(By.CSS_SELECTOR, "nav.pager a.next")
        if not nxt:
            break
        nxt[0].click()
        wait(browser).until(left_the_page(nxt[0]))
    assert sorted(seen) == sorted([f"bulk-{i:03}" for i in range(120)] + ["o0", "o1"])
    assert len(seen) == s["ready"]

    browser.get(base + "?state=dead")
    ids = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#messages td.id a")]
    assert ids == ["bad"]
    assert "HTTP 410 Gone" in browser.find_element(By.CSS_SELECTOR, "#messages td.err").text

    # In the order they will leave the state (DQ.PEEK): priority first.
    r.execute_command("DQ.ADD", "orders", "urgent", "ID", "urgent", "PRIORITY", 100)
    browser.get(base + "?state=ready")
    browser.find_element(By.PARTIAL_LINK_TEXT, "next to leave").click()
    wait(browser).until(EC.url_contains("order=next"))
    ids = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#messages td.id a")]
    assert ids[0] == "urgent" and len(ids) == 50
    assert not browser.find_elements(By.CSS_SELECTOR, "nav.pager a.next")


def test_dead_message_shows_reason_and_error_and_redrive_moves_it_back(r, dashboard, browser):
    fill(r)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(f"/q/{q(server_name(redis_url()))}/orders/m/bad"))
    wait(browser).until(EC.presence_of_element_located((By.ID, "dead-reason")))
    assert browser.find_element(By.ID, "dead-reason").text == "permanent"
    assert browser.find_element(By.ID, "last-error").text == "HTTP 410 Gone: order was deleted"
    assert browser.find_element(By.ID, "message-state").text == "dead"
    # JSON payloads are pretty-printed.
    assert browser.find_element(By.ID, "payload").text == '{\n  "order": "bad"\n}'
    screenshot(browser, "message")

    browser.find_element(By.XPATH, "//button[normalize-space()='Redrive']").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "confirm")))
    assert "Redrive dead message bad" in browser.find_element(By.ID, "question").text
    # Nothing has changed before the confirmation.
    assert get(r, "orders", "bad")["state"] == b"dead"
    screenshot(browser, "confirm")
    browser.find_element(By.ID, "confirm").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert browser.find_element(By.ID, "result").text.startswith("Redrove 1 message (DQ.REDRIVE replied 1)")
    assert get(r, "orders", "bad")["state"] == b"ready"
    screenshot(browser, "done")


def test_cancel_and_purge_are_confirmed_and_report_counts(r, dashboard, browser):
    fill(r)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(f"/q/{q(server_name(redis_url()))}/emails"))
    wait(browser).until(EC.presence_of_element_located((By.XPATH, "//button[normalize-space()='Purge ready']")))
    browser.find_element(By.XPATH, "//button[normalize-space()='Purge ready']").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "confirm")))
    assert stats(r, "emails")["ready"] == 3
    browser.find_element(By.ID, "confirm").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert browser.find_element(By.ID, "result").text == "Purged 3 ready messages (DQ.PURGE replied 3)."
    assert stats(r, "emails")["ready"] == 0

    browser.get(dashboard.url(f"/q/{q(server_name(redis_url()))}/orders/m/later"))
    browser.find_element(By.XPATH, "//button[normalize-space()='Cancel message']").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "confirm"))).click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert browser.find_element(By.ID, "result").text == "Cancelled 1 message (DQ.CANCEL replied 1)."
    assert get(r, "orders", "later") is None


def test_a_script_payload_shows_as_text_and_does_not_run(r, dashboard, browser):
    payload = "<script>window.__pwned=1</script>"
    evil_id = '<img src=x onerror="window.__pwned=2">'
    r.execute_command("DQ.ADD", "evil<b>", payload, "ID", evil_id)
    r.execute_command("DQ.ADD", "evil<b>", b"\x00\x01<script>window.__pwned=3</script>\xff", "ID", "bin")
    r.execute_command("DQ.POP", "evil<b>", "COUNT", 1)
    r.execute_command("DQ.NACK", "evil<b>", evil_id, "DEAD", "ERROR", "</pre><script>window.__pwned=4</script>")
    no_autorefresh(browser, dashboard.base)
    server = q(server_name(redis_url()))
    browser.get(dashboard.url("/"))
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#queues td.name a")))
    assert browser.find_element(By.CSS_SELECTOR, "#queues td.name a").text == "evil<b>"
    browser.get(dashboard.url(f"/q/{server}/{q('evil<b>')}"))
    wait(browser).until(EC.presence_of_element_located((By.ID, "messages")))
    assert evil_id in browser.find_element(By.ID, "messages").text
    browser.find_element(By.LINK_TEXT, evil_id).click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "payload")))
    assert browser.find_element(By.ID, "payload").text == payload
    assert browser.find_element(By.ID, "message-id").text == evil_id
    assert browser.find_element(By.ID, "last-error").text == "</pre><script>window.__pwned=4</script>"
    assert browser.execute_script("return window.__pwned") is None
    assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img")
    # A binary payload: hex dump plus the text with bad bytes replaced.
    browser.get(dashboard.url(f"/q/{server}/{q('evil<b>')}/m/bin"))
    hexdump = browser.find_element(By.ID, "payload-hex").text
    assert hexdump.startswith("00000000  00 01 3c 73 63 72 69 70 74 3e")
    assert "<script>window.__pwned=3</script>" in browser.find_element(By.ID, "payload").text
    assert browser.execute_script("return window.__pwned") is None
    screenshot(browser, "binary-message")


# --- security ----------------------------------------------------------------------


def test_read_only_shows_no_action_and_refuses_a_direct_post(r, start_dashboard, browser):
    fill(r)
    d = start_dashboard("--redis", redis_url(), "--read-only")
    no_autorefresh(browser, d.base)
    path = f"/q/{q(server_name(redis_url()))}/orders"
    browser.get(d.url(path + "/m/bad"))
    wait(browser).until(EC.presence_of_element_located((By.ID, "dead-reason")))
    assert not browser.find_elements(By.TAG_NAME, "form")
    assert not browser.find_elements(By.TAG_NAME, "button")
    browser.get(d.url(path))
    assert not browser.find_elements(By.TAG_NAME, "form")
    http = Http(d.base)
    status, _, _ = http.get(path)
    assert status == 200
    status, body, _ = http.post(path + "/action", {"op": "redrive", "id": "bad", "confirm": "yes", "csrf": "x"})
    assert status == 403 and "read-only" in body
    assert get(r, "orders", "bad")["state"] == b"dead"


def test_csrf_origin_and_bad_forms_change_nothing(r, dashboard):
    fill(r)
    path = f"/q/{q(server_name(redis_url()))}/orders"
    http = Http(dashboard.base)
    status, page, _ = http.get(path + "/m/bad")
    assert status == 200
    token = csrf_of(page)
    form = {"op": "redrive", "id": "bad", "confirm": "yes"}
    # No token, a wrong token, a token without its cookie, a foreign origin.
    assert http.post(path + "/action", form)[0] == 403
    assert http.post(path + "/action", {**form, "csrf": "0" * 64})[0] == 403
    assert Http(dashboard.base).post(path + "/action", {**form, "csrf": token})[0] == 403
    assert http.post(path + "/action", {**form, "csrf": token}, headers={"Origin": "http://evil.example"})[0] == 403
    # GET never acts.
    assert http.get(path + "/action?op=redrive&id=bad&confirm=yes")[0] == 405
    # Bad fields.
    assert http.post(path + "/action", {"op": "explode", "csrf": token, "confirm": "yes"})[0] == 400
    assert http.post(path + "/action", {"op": "redrive", "csrf": token, "confirm": "yes"})[0] == 400
    assert http.post(path + "/action", {"op": "purge", "state": "gone", "csrf": token, "confirm": "yes"})[0] == 400
    assert get(r, "orders", "bad")["state"] == b"dead"
    # Without confirm: a confirmation page, nothing done.
    status, body, _ = http.post(path + "/action", {**form, "confirm": "", "csrf": token})
    assert status == 200 and 'id="confirm"' in body
    assert get(r, "orders", "bad")["state"] == b"dead"
    # With everything right, from this origin: done.
    status, body, _ = http.post(path + "/action", {**form, "csrf": token}, headers={"Origin": dashboard.base})
    assert status == 200 and "Redrove 1 message" in body
    assert get(r, "orders", "bad")["state"] == b"ready"


def test_unknown_things_and_bad_parameters_get_clear_errors(r, dashboard):
    fill(r)
    server = q(server_name(redis_url()))
    http = Http(dashboard.base)
    cases = [
        (f"/q/{server}/nope", 404, "Unknown queue"),
        (f"/q/{server}/orders/m/nope", 404, "Unknown message"),
        (f"/q/{q('10.9.9.9:1')}/orders", 404, "Unknown server"),
        (f"/q/{server}/orders?cursor=-1", 400, "Bad cursor"),
        (f"/q/{server}/orders?cursor=abc", 400, "Bad cursor"),
        (f"/q/{server}/orders?state=archived", 400, "Bad state"),
        (f"/q/{server}/orders?order=next", 400, "Bad order"),
        (f"/q/{server}/orders?state=dead&order=random", 400, "Bad order"),
        ("/nothing/here", 404, "Not found"),
    ]
    for path, status, title in cases:
        got, body, _ = http.get(path)
        assert (got, title in body) == (status, True), path


def test_auth_token_and_basic(r, start_dashboard):
    fill(r)
    d = start_dashboard("--redis", redis_url(), env={"DQ_DASHBOARD_TOKEN": "t0k3n", "DQ_DASHBOARD_BASIC_AUTH": "ops:pa55"})
    for path in ("/", "/metrics", "/healthz", "/static/style.css"):
        status, _, headers = Http(d.base).get(path)
        assert status == 401, path
        assert headers.get("www-authenticate", "").startswith("Basic")
    assert Http(d.base, {"Authorization": "Bearer wrong"}).get("/")[0] == 401
    assert Http(d.base, {"Authorization": "Bearer t0k3n"}).get("/")[0] == 200
    assert Http(d.base, {"Authorization": "Bearer t0k3n"}).get("/metrics")[0] == 200
    assert Http(d.base, {"Authorization": "Basic b3BzOnBhNTU="}).get("/healthz")[0] == 200
    assert "t0k3n" not in d.log_text() and "pa55" not in d.log_text()


def test_the_redis_password_reaches_no_page_and_no_log(r, start_dashboard):
    fill(r)
    password = "s3cr3t-Passw0rd"
    r.config_set("requirepass", password)
    try:
        url = redis_url().replace("redis://", f"redis://default:{password}@")
        d = start_dashboard("--redis", url)
        http = Http(d.base)
        server = q(server_name(redis_url()))
        pages = ["/", f"/q/{server}/orders", f"/q/{server}/orders/m/bad", "/metrics", "/healthz", f"/q/{server}/nope"]
        for path in pages:
            status, body, _ = http.get(path)
            assert status in (200, 404), path
            assert password not in body, path
        assert password not in d.log_text()
        # Not even when the server refuses it.
        bad = start_dashboard_fails(start_dashboard, url.replace(password, password + "x"))
        assert password not in bad
    finally:
        r2 = redis.Redis.from_url(redis_url(), password=password)
        r2.config_set("requirepass", "")
        r2.close()


def start_dashboard_fails(start_dashboard, url):
    try:
        d = start_dashboard("--redis", url)
    except RuntimeError as e:
        return str(e)
    d.stop()
    return d.log_text()


def test_a_client_that_never_finishes_its_headers_is_closed(dashboard):
    """The header-read timeout (30 s, the relay's /metrics has it too): a
    byte of header now and then, never the end of the request head, does
    not hold a connection open for as long as the client likes."""
    host, port = dashboard.base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=1) as s:
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode())
        answer, closed = b"", False
        deadline = time.monotonic() + 300
        while not closed and time.monotonic() < deadline:
            try:
                s.sendall(b"a")
                got = s.recv(256)
                answer += got
                closed = got == b""
            except socket.timeout:
                pass
            except OSError:
                # A write or read after the server closed may be reset.
                closed = True
        assert closed, "still open after 300 s"
        assert answer == b"", answer


# --- metrics -------------------------------------------------------------------------


def test_metrics_parse_and_match_dq_stats(r, dashboard):
    # The timer ticks at least once (it makes a message due after 1 ms
    # ready), so that a tick count reported as 0 fails.
    r.execute_command("DQ.ADD", "tick", "x", "DELAY", 1)
    deadline = time.monotonic() + 10
    while stats(r, "tick")["ready"] != 1:
        assert time.monotonic() < deadline, "the timer did not make a message ready in 10 s"
        time.sleep(0.005)
    r.delete("tick")
    fill(r)
    r.execute_command("DQ.ACK", "orders", "busy")
    ticks_before = r.info("dq")["dq_timer_ticks"]
    assert ticks_before >= 1
    # The ages the scrape reports lie between these and the ones read after it.
    ages_before = {q: stats(r, q)["oldest-ready-age-ms"] or 0 for q in ("orders", "emails")}
    status, text, headers = Http(dashboard.base).get("/metrics")
    assert status == 200
    assert headers["content-type"].startswith("application/openmetrics-text")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    server = server_name(redis_url())

    def value(family, **labels):
        found = [
            s.value
            for s in families[family].samples
            if all(s.labels.get(k) == v for k, v in labels.items()) and not s.name.endswith("_created")
        ]
        assert len(found) == 1, (family, labels, found)
        return found[0]

    for queue in ("orders", "emails"):
        s = stats(r, queue)
        for state in ("delayed", "ready", "inflight", "dead"):
            assert value("dq_messages", server=server, queue=queue, state=state) == s[state]
        for field in ("added", "delivered", "acked", "nacked", "retried", "lease-expired",
                      "dead-lettered", "expired", "redriven", "cancelled", "purged"):
            assert value("dq_" + field.replace("-", "_"), server=server, queue=queue) == s[field], field
        age = value("dq_oldest_ready_age_seconds", server=server, queue=queue)
        assert ages_before[queue] / 1000 <= age <= (s["oldest-ready-age-ms"] or 0) / 1000, (queue, age)
    info = r.info("dq")
    assert ticks_before <= value("dq_timer_ticks", server=server) <= info["dq_timer_ticks"]
    # Nothing is overdue: the only timed work left is the delayed message,
    # an hour away.
    assert value("dq_timer_lateness_seconds", server=server) == 0
    assert value("dq_server_up", server=server) == 1
    assert Http(dashboard.base).get("/healthz")[:2] == (200, "ok\n")


# --- cluster -------------------------------------------------------------------------


def test_cluster_one_seed_shows_the_queues_of_every_master(start_dashboard, browser):
    nodes = cluster_nodes()
    placed = {}
    for node in nodes:
        host, port = node.split(":")
        c = redis.Redis(host=host, port=int(port))
        c.flushall()
        for i in range(200):
            name = f"cq-{i}"
            if name in placed.values():
                continue
            try:
                c.execute_command("DQ.ADD", name, f"hello from {node}", "ID", "m1")
            except redis.exceptions.MovedError:
                continue
            placed[node] = name
            break
        c.close()
    assert len(placed) == 3, placed
    d = start_dashboard("--redis", f"redis://{nodes[0]}")
    assert '"cluster":true' in d.log_text()
    no_autorefresh(browser, d.base)
    browser.get(d.url("/"))
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#queues tbody tr")))
    rows = {
        row.get_attribute("data-queue"): row.find_element(By.CSS_SELECTOR, "td.server").text
        for row in browser.find_elements(By.CSS_SELECTOR, "#queues tbody tr")
    }
    assert rows == {name: node for node, name in placed.items()}
    screenshot(browser, "cluster-list")
    # Each queue's pages are read on its own master.
    for node, name in placed.items():
        browser.get(d.url(f"/q/{q(node)}/{q(name)}/m/m1"))
        wait(browser).until(EC.presence_of_element_located((By.ID, "payload")))
        assert browser.find_element(By.ID, "payload").text == f"hello from {node}"
    status, text, _ = Http(d.base).get("/metrics")
    assert status == 200
    for node, name in placed.items():
        assert f'dq_messages{{server="{node}",queue="{name}",state="ready"}} 1' in text
    assert re.search(r"dq_timer_ticks_total\{server=", text)


# --- JavaScript off, odd names ----------------------------------------------------------


def test_reading_and_acting_work_with_javascript_off(r, dashboard, browser_without_js):
    b = browser_without_js
    fill(r)
    b.get(dashboard.url("/"))
    # Scripts really are off: the script-only auto-refresh box stays hidden.
    assert not b.find_element(By.ID, "refresh-toggle").is_displayed()
    b.find_element(By.LINK_TEXT, "orders").click()
    wait(b).until(EC.presence_of_element_located((By.ID, "messages")))
    b.find_element(By.PARTIAL_LINK_TEXT, "dead").click()
    wait(b).until(EC.url_contains("state=dead"))
    b.find_element(By.LINK_TEXT, "bad").click()
    wait(b).until(EC.presence_of_element_located((By.ID, "dead-reason")))
    assert b.find_element(By.ID, "last-error").text == "HTTP 410 Gone: order was deleted"
    b.find_element(By.XPATH, "//button[normalize-space()='Redrive']").click()
    wait(b).until(EC.presence_of_element_located((By.ID, "confirm"))).click()
    wait(b).until(EC.presence_of_element_located((By.ID, "result")))
    assert get(r, "orders", "bad")["state"] == b"ready"


def test_queue_names_and_ids_of_any_bytes_round_trip(r, dashboard, browser):
    queue = b"a/b?c#d %25\xff"
    id_ = b"id/..%2F\x00\xfe"
    r.execute_command("DQ.ADD", queue, "payload", "ID", id_)
    r.execute_command("DQ.POP", queue)
    r.execute_command("DQ.NACK", queue, id_, "DEAD")
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url("/"))
    link = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#queues td.name a")))
    assert link.text == "a/b?c#d %25\\xff"
    link.click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "messages")))
    assert browser.find_element(By.ID, "count-dead").text == "1"
    browser.find_element(By.CSS_SELECTOR, "#messages td.id a").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "message-id")))
    assert browser.find_element(By.ID, "message-id").text == "id/..%2F\\x00\\xfe"
    browser.find_element(By.XPATH, "//button[normalize-space()='Redrive']").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "confirm"))).click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert get(r, queue, id_)["state"] == b"ready"
