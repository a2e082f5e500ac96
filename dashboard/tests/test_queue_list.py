"""The queue list and /metrics with many queues: paging, sorting and
filters (with and without JavaScript), what /metrics chooses to show, and
that a page or a scrape costs one DQ.QUEUES per server and no DQ.STATS per
queue, also with 10,000 queues. Sizes are checked; times are not (machines
are noisy): make bench measures those."""

import time
import urllib.parse

import pytest
import redis
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import Http, cluster_nodes, command_calls, left_the_page, no_autorefresh, q, redis_url, screenshot, server_name, stats

WAIT = 15
KB = 1000


def wait(driver):
    return WebDriverWait(driver, WAIT, poll_frequency=0.1)


def fill_many(r, n=120):
    """q-000 … q-{n-1}: one delayed message each, i % 5 ready ones, and
    one dead message in every tenth (q-003, q-013, …)."""
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        name = f"q-{i:03}"
        pipe.execute_command("DQ.ADD", name, "later", "DELAY", 3_600_000)
        for j in range(i % 5):
            pipe.execute_command("DQ.ADD", name, f"m{j}")
        if i % 10 == 3:
            pipe.execute_command("DQ.ADD", name, "doomed", "ID", "doomed", "PRIORITY", 100)
    pipe.execute()
    for i in range(3, n, 10):
        name = f"q-{i:03}"
        assert r.execute_command("DQ.POP", name)[0][0] == b"doomed"
        r.execute_command("DQ.NACK", name, "doomed", "DEAD")


def names(driver):
    return [row.get_attribute("data-queue") for row in driver.find_elements(By.CSS_SELECTOR, "#queues tbody tr")]


def column(driver, state):
    return [
        int(cell.text.replace(",", ""))
        for cell in driver.find_elements(By.CSS_SELECTOR, f'#queues tbody td[data-state="{state}"]')
    ]


def showing(driver):
    return driver.find_element(By.CSS_SELECTOR, "#pager-top .showing").text


def follow(driver, element):
    """Clicks a link or button and waits for the next page."""
    element.click()
    wait(driver).until(left_the_page(element))


def query_of(driver):
    return urllib.parse.parse_qs(urllib.parse.urlparse(driver.current_url).query)


def walk_the_list(b, base):
    """Pages, sorts and filters the way a reader does: links, the form's
    fields and its button. The same with and without JavaScript."""
    b.get(base + "/")
    wait(b).until(EC.presence_of_element_located((By.ID, "queues")))
    assert names(b) == [f"q-{i:03}" for i in range(50)]
    assert showing(b) == "Showing 1–50 of 120 queues"
    assert b.find_element(By.ID, "total-queues").text == "120"

    # Pages: next, then a page number, then prev.
    follow(b, b.find_element(By.CSS_SELECTOR, "#pager-top a.next"))
    assert names(b) == [f"q-{i:03}" for i in range(50, 100)]
    assert showing(b) == "Showing 51–100 of 120 queues"
    follow(b, b.find_element(By.CSS_SELECTOR, "#pager a.page[href$='page=3']"))
    assert names(b) == [f"q-{i:03}" for i in range(100, 120)]
    assert not b.find_elements(By.CSS_SELECTOR, "#pager-top a.next")
    assert b.find_element(By.CSS_SELECTOR, "#pager-top .current").text == "3"
    follow(b, b.find_element(By.CSS_SELECTOR, "#pager-top a.prev"))
    assert names(b)[0] == "q-050"

    # Sort by a state count: biggest first, ties by name; again: smallest first.
    follow(b, b.find_element(By.CSS_SELECTOR, 'th[data-sort="ready"] a'))
    assert query_of(b) == {"sort": ["ready"]}
    ready = column(b, "ready")
    assert ready == sorted(ready, reverse=True) and ready[0] == 4
    assert names(b)[:3] == ["q-004", "q-009", "q-014"]
    assert b.find_element(By.CSS_SELECTOR, 'th[data-sort="ready"]').get_attribute("aria-sort") == "descending"
    follow(b, b.find_element(By.CSS_SELECTOR, "#pager-top a.next"))
    assert column(b, "ready")[0] <= ready[-1], "page 2 goes on where page 1 ended"
    follow(b, b.find_element(By.CSS_SELECTOR, 'th[data-sort="ready"] a'))
    assert query_of(b) == {"sort": ["ready"], "dir": ["asc"]}, "a new sort starts at page 1"
    assert column(b, "ready")[:24] == [0] * 24
    follow(b, b.find_element(By.CSS_SELECTOR, 'th[data-sort="name"] a'))
    assert names(b)[0] == "q-000"
    follow(b, b.find_element(By.CSS_SELECTOR, 'th[data-sort="name"] a'))
    assert names(b)[0] == "q-119", "name, descending"
    follow(b, b.find_element(By.CSS_SELECTOR, 'th[data-sort="dead"] a'))
    assert names(b)[:12] == [f"q-{i:03}" for i in range(3, 120, 10)]

    # The name filter: text is a substring, a glob is a glob; the sort stays.
    box = b.find_element(By.ID, "filter-q")
    box.clear()
    box.send_keys("q-11")
    follow(b, b.find_element(By.ID, "filter-apply"))
    assert query_of(b)["q"] == ["q-11"] and query_of(b)["sort"] == ["dead"]
    assert sorted(names(b)) == [f"q-{i:03}" for i in range(110, 120)]
    assert names(b)[0] == "q-113", "still sorted by dead"
    assert b.find_element(By.ID, "total-queues").text == "10"
    assert b.find_element(By.ID, "total-dead").text == "1"
    box = b.find_element(By.ID, "filter-q")
    box.clear()
    box.send_keys("q-0?5")
    follow(b, b.find_element(By.ID, "filter-apply"))
    assert sorted(names(b)) == [f"q-0{i}5" for i in range(10)]

    # "has dead letters", then a state count with a minimum.
    follow(b, b.find_element(By.ID, "filter-clear"))
    assert b.find_element(By.ID, "total-queues").text == "120"
    follow(b, b.find_element(By.ID, "has-dead"))
    assert sorted(names(b)) == [f"q-{i:03}" for i in range(3, 120, 10)]
    assert all(n >= 1 for n in column(b, "dead"))
    assert b.find_element(By.ID, "total-dead").text == "12"
    assert b.find_element(By.ID, "view-note").is_displayed()
    b.find_element(By.CSS_SELECTOR, '#filter-has option[value="ready"]').click()
    minimum = b.find_element(By.ID, "filter-min")
    minimum.clear()
    minimum.send_keys("4")
    follow(b, b.find_element(By.ID, "filter-apply"))
    assert query_of(b)["has"] == ["ready"] and query_of(b)["min"] == ["4"]
    assert set(column(b, "ready")) == {4}
    assert b.find_element(By.ID, "total-queues").text == "24"

    # A filter that matches nothing says so.
    b.get(base + "/?q=nothing-like-this")
    assert b.find_element(By.ID, "no-match").text == "No queue matches this view."

    # Page size.
    b.get(base + "/")
    follow(b, b.find_element(By.CSS_SELECTOR, "#pager-top .per a[href$='per=100']"))
    assert len(names(b)) == 100


def test_the_list_pages_sorts_and_filters(r, dashboard, browser):
    fill_many(r)
    no_autorefresh(browser, dashboard.base)
    walk_the_list(browser, dashboard.base)
    browser.get(dashboard.url("/?has=dead&sort=dead"))
    screenshot(browser, "queue-list-filtered")


def test_the_list_pages_sorts_and_filters_with_javascript_off(r, dashboard, browser_without_js):
    fill_many(r)
    walk_the_list(browser_without_js, dashboard.base)


def test_list_parameters_that_make_no_sense_get_clear_errors(r, dashboard):
    fill_many(r, 3)
    http = Http(dashboard.base)
    cases = [
        ("/?sort=colour", 400, "sort must be one of"),
        ("/?dir=up", 400, "dir must be asc or desc"),
        ("/?page=0", 400, "page must be a whole number"),
        ("/?per=5000", 400, "per must be a whole number from 1 to 200"),
        ("/?has=gone", 400, "has must be any, delayed, ready, inflight or dead"),
        ("/?min=-2", 400, "min must be a whole number"),
        (f"/?server={q('10.9.9.9:1')}", 404, "Unknown server"),
    ]
    for path, status, text in cases:
        got, body, _ = http.get(path)
        assert (got, text in body) == (status, True), (path, got, body[-600:])
    # Past the last page: the last page.
    status, body, _ = http.get("/?page=99")
    assert status == 200 and "Showing <b>1–3</b> of <b>3</b> queues" in body
    # A name filter is escaped on the page like any other text.
    status, body, _ = http.get("/?q=" + q('"><script>window.__pwned=1</script>'))
    assert status == 200 and "<script>window.__pwned" not in body


def test_the_per_server_view(r, dashboard, browser):
    fill_many(r, 5)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url("/"))
    server = server_name(redis_url())
    follow(browser, browser.find_element(By.CSS_SELECTOR, "a.server-link"))
    assert query_of(browser) == {"server": [server]}
    assert len(names(browser)) == 5
    assert server in browser.find_element(By.ID, "view-note").text


# --- /metrics: totals and the queues chosen -----------------------------------------------


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def queues_with_series(text):
    return {s.labels["queue"] for f in text_string_to_metric_families(text) if f.name == "dq_messages" for s in f.samples}


def value(fams, family, **labels):
    found = [
        s.value
        for s in fams[family].samples
        if all(s.labels.get(k) == v for k, v in labels.items()) and not s.name.endswith("_created")
    ]
    assert len(found) == 1, (family, labels, found)
    return found[0]


def test_metrics_totals_and_the_queues_chosen(r, start_dashboard):
    fill_many(r, 30)
    server = server_name(redis_url())
    every = [stats(r, f"q-{i:03}") for i in range(30)]

    def lag():
        """The largest oldest-ready age of the 30 queues, in ms."""
        return max(stats(r, f"q-{i:03}")["oldest-ready-age-ms"] or 0 for i in range(30))

    # The lag the scrape reports lies between the one read before it and the
    # one read after; the first is waited for until it is at least 1 ms, so
    # that a lag reported as 0 fails.
    deadline = time.monotonic() + 10
    while (lag_before := lag()) == 0:
        assert time.monotonic() < deadline, "no ready message aged 1 ms in 10 s"
        time.sleep(0.005)

    d = start_dashboard("--redis", redis_url())
    status, text, _ = Http(d.base).get("/metrics")
    assert status == 200
    fams = families(text)
    assert len(queues_with_series(text)) == 30
    assert value(fams, "dq_server_queues", server=server) == 30
    for state in ("delayed", "ready", "inflight", "dead"):
        assert value(fams, "dq_server_messages", server=server, state=state) == sum(s[state] for s in every)
    assert value(fams, "dq_server_added", server=server) == sum(s["added"] for s in every)
    assert value(fams, "dq_server_dead_lettered", server=server) == 3
    assert value(fams, "dq_metrics_queues_omitted", server=server) == 0
    reported = value(fams, "dq_server_oldest_ready_age_seconds", server=server)
    assert lag_before / 1000 <= reported <= lag() / 1000, (lag_before, reported)

    # The scrape's ?queue= (repeatable) narrows; the totals stay whole.
    status, text, _ = Http(d.base).get("/metrics?queue=q-00*&queue=q-029")
    assert queues_with_series(text) == {f"q-00{i}" for i in range(10)} | {"q-029"}
    assert value(families(text), "dq_server_queues", server=server) == 30

    # --metrics-queues chooses; --metrics-max-queues caps, first by name,
    # and says how many it left out.
    d = start_dashboard("--redis", redis_url(), "--metrics-queues", "q-01*", "--metrics-queues", "q-02[0-4]",
                        "--metrics-max-queues", "12")
    status, text, _ = Http(d.base).get("/metrics")
    assert queues_with_series(text) == {f"q-01{i}" for i in range(10)} | {"q-020", "q-021"}
    fams = families(text)
    assert value(fams, "dq_metrics_queues_omitted", server=server) == 3
    assert value(fams, "dq_server_queues", server=server) == 30
    status, text, _ = Http(d.base).get("/metrics?queue=q-02*")
    assert queues_with_series(text) == {f"q-02{i}" for i in range(5)}

    # 0: totals only.
    d = start_dashboard("--redis", redis_url(), "--metrics-max-queues", "0")
    status, text, _ = Http(d.base).get("/metrics")
    assert queues_with_series(text) == set()
    assert value(families(text), "dq_metrics_queues_omitted", server=server) == 30


def test_metrics_globs_choose_what_dq_queues_match_chooses(r, dashboard):
    """The scrape's globs are matched by the dashboard; the list's by the
    server (DQ.QUEUES MATCH): both must pick the same names."""
    odd = ["a*b", "a?b", "a[b", "a]b", "a\\b", "ab", "aXb", "a-b", "b", "x[1]", "é-1", "Ab"]
    for name in odd:
        r.execute_command("DQ.ADD", name, "p")
    http = Http(dashboard.base)
    for pattern in ["a*", "a?b", "a\\*b", "a\\?b", "a[*?]b", "a[^X]b", "a[a-z]b", "[A-Z]*", "*\\\\*", "x\\[1\\]",
                    "é*", "a[b", "*]*", "?", "[ab]", "nothing"]:
        want = {n.decode() for n in r.execute_command("DQ.QUEUES", "MATCH", pattern)}
        status, text, _ = http.get("/metrics?queue=" + q(pattern))
        assert status == 200
        assert queues_with_series(text) == want, pattern


# --- cost: one DQ.QUEUES per server, no DQ.STATS per queue --------------------------------


def quiet_dashboard(start_dashboard, client, *args):
    """A dashboard whose sampler reads once at start and then not for an
    hour, so that the commands a request sends can be counted."""
    client.config_resetstat()
    d = start_dashboard("--sample-interval", "1h", "--history", "2h", *args)
    deadline = time.monotonic() + 60
    while command_calls(client, "dq.queues") < (1,):
        assert time.monotonic() < deadline, "the sampler's first read never came"
        time.sleep(0.05)
    return d


def test_ten_thousand_queues_one_call_per_request(r, start_dashboard):
    n = 10_000
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.execute_command("DQ.ADD", f"queue-{i:05}", '{"n":1}')
    pipe.execute()
    for i in range(0, n, 1000):
        name = f"queue-{i:05}"
        r.execute_command("DQ.POP", name)
        r.execute_command("DQ.NACK", name, r.execute_command("DQ.PEEK", name, "INFLIGHT")[0][0], "DEAD")
    d = quiet_dashboard(start_dashboard, r, "--redis", redis_url())
    http = Http(d.base)
    server = server_name(redis_url())

    def costs(path):
        before = command_calls(r, "dq.queues", "dq.stats")
        status, body, _ = http.get(path)
        after = command_calls(r, "dq.queues", "dq.stats")
        assert status == 200, (path, body[-500:])
        return body, (after[0] - before[0], after[1] - before[1])

    body, cost = costs("/")
    assert cost == (1, 0), "one DQ.QUEUES WITHSTATS, no DQ.STATS"
    assert len(body.encode()) <= 500 * KB, len(body)
    assert 'id="total-queues">10,000<' in body
    assert body.count('<tr data-queue="') == 50
    assert 'href="/?page=200"' in body
    for path in ("/?sort=dead&page=2", "/?has=dead", "/?q=queue-00*", "/?per=200&page=50&sort=ready"):
        body, cost = costs(path)
        assert cost == (1, 0), path
        assert len(body.encode()) <= 500 * KB, (path, len(body))
    body, _ = costs("/?has=dead")
    assert body.count('<tr data-queue="') == 10

    text, cost = costs("/metrics")
    assert cost == (1, 0)
    assert len(text.encode()) <= 500 * KB, len(text)
    fams = families(text)
    assert value(fams, "dq_server_queues", server=server) == n
    assert value(fams, "dq_server_messages", server=server, state="ready") == n - 10
    assert value(fams, "dq_server_messages", server=server, state="dead") == 10
    assert len(queues_with_series(text)) == 250
    assert value(fams, "dq_metrics_queues_omitted", server=server) == n - 250
    text, cost = costs("/metrics?queue=queue-0000*")
    assert cost == (1, 0)
    assert queues_with_series(text) == {f"queue-0000{i}" for i in range(10)}
    assert value(families(text), "dq_metrics_queues_omitted", server=server) == 0

    # A queue's page reads that queue only.
    _, cost = costs(f"/q/{q(server)}/queue-04242")
    assert cost == (0, 1)


def test_cluster_one_call_per_master(start_dashboard):
    nodes = cluster_nodes()
    clients = []
    for node in nodes:
        host, port = node.split(":")
        c = redis.Redis(host=host, port=int(port))
        c.flushall()
        clients.append(c)
    # Each master some queues of its own: names whose slots it holds.
    placed = {node: 0 for node in nodes}
    for i in range(300):
        for node, c in zip(nodes, clients):
            try:
                c.execute_command("DQ.ADD", f"cq-{i}", "p")
            except redis.exceptions.MovedError:
                continue
            placed[node] += 1
            break
    assert all(placed.values()), placed
    for c in clients:
        c.config_resetstat()
    d = start_dashboard("--redis", f"redis://{nodes[0]}", "--sample-interval", "1h", "--history", "2h")
    deadline = time.monotonic() + 60
    while any(command_calls(c, "dq.queues") < (1,) for c in clients):
        assert time.monotonic() < deadline, "the sampler's first read never came"
        time.sleep(0.05)
    http = Http(d.base)

    def costs(path):
        before = [command_calls(c, "dq.queues", "dq.stats") for c in clients]
        status, body, _ = http.get(path)
        assert status == 200, (path, body[-500:])
        after = [command_calls(c, "dq.queues", "dq.stats") for c in clients]
        return body, [(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before)]

    body, cost = costs("/")
    assert cost == [(1, 0)] * 3
    assert f'id="total-queues">{sum(placed.values())}<' in body
    _, cost = costs("/?sort=server&dir=desc&page=2")
    assert cost == [(1, 0)] * 3
    text, cost = costs("/metrics")
    assert cost == [(1, 0)] * 3
    fams = families(text)
    for node in nodes:
        assert value(fams, "dq_server_queues", server=node) == placed[node]
    # One master's view reads that master only.
    body, cost = costs(f"/?server={q(nodes[1])}")
    assert cost == [(0, 0), (1, 0), (0, 0)]
    assert body.count('<tr data-queue="') == min(placed[nodes[1]], 50)
    for c in clients:
        c.close()


