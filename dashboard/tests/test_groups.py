"""A queue's groups in the dashboard (docs/commands.md, "Groups: limits,
fair order, pauses", DQ.GROUPS): the groups tab (counts, sorted by backlog,
filtered, paged, bounded), a group's pause and resume (confirmed, CSRF,
--read-only), the settings' GROUPLIMIT, GROUPRATE and ORDER, the groups
count, and a sharded queue's groups, each paused on its own shard. Run by
scripts/test-dashboard under scripts/with-servers --cluster."""

import time
import zlib

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import Http, cluster_nodes, command_calls, csrf_of, left_the_page, no_autorefresh, q, redis_url, screenshot, server_name
from test_flow_and_schedules import Cluster, shard_names

WAIT = 15
HOUR = 3_600_000


def wait(driver):
    return WebDriverWait(driver, WAIT, poll_frequency=0.1)


def until(check, what, timeout=WAIT):
    """Polls `check` until it returns something true, or fails saying `what`."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def groups(client, queue, match=None):
    """Every group of DQ.GROUPS, as {name: (waiting, ready, inflight, paused-until)}."""
    out, cursor = {}, "0"
    while True:
        args = ["DQ.GROUPS", queue, cursor]
        if match is not None:
            args += ["MATCH", match]
        cursor, entries = client.execute_command(*args, "COUNT", 1000)
        for name, waiting, ready, inflight, paused in entries:
            out[name.decode()] = (waiting, ready, inflight, paused)
        cursor = cursor.decode() if isinstance(cursor, bytes) else str(cursor)
        if cursor == "0":
            return out


def by_backlog(gs):
    """Names sorted as the tab sorts them: waiting + ready, most first; then by name."""
    return sorted(gs, key=lambda n: (-(gs[n][0] + gs[n][1]), n))


def queue_path(queue="orders"):
    return f"/q/{q(server_name(redis_url()))}/{q(queue)}"


def groups_path(queue="orders", extra=""):
    return queue_path(queue) + "?tab=groups" + extra


def shown_rows(browser):
    return browser.find_elements(By.CSS_SELECTOR, "#group-table tbody tr")


def shown_names(browser):
    return [row.get_attribute("data-group") for row in shown_rows(browser)]


def add(client, queue, group, n, prefix=None):
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.execute_command("DQ.ADD", queue, "x", "ID", f"{prefix or group}-{i}", "GROUP", group)
    pipe.execute()


def popped_ids(client, queue, count=100):
    got = client.execute_command("DQ.POP", queue, "COUNT", count) or []
    return [entry[0].decode() for entry in got]


# --- the tab ------------------------------------------------------------------------------


def test_the_groups_tab_lists_the_groups_with_their_counts_sorted_by_backlog(r, dashboard, browser):
    r.execute_command("DQ.CONFIG", "orders", "SET", "GROUPLIMIT", 2)
    add(r, "orders", "busy", 2)  # added first: the POP below takes busy's first
    add(r, "orders", "big", 6)
    add(r, "orders", "mid", 3)
    add(r, "orders", "one", 1)
    add(r, "orders", "also-one", 1)
    assert popped_ids(r, "orders", 1) == ["busy-0"]
    r.execute_command("DQ.PAUSE", "orders", "FOR", HOUR, "GROUP", "idle")  # a paused group, no message
    r.execute_command("DQ.PAUSE", "orders", "GROUP", "mid")
    server = groups(r, "orders")
    assert set(server) == {"busy", "big", "mid", "one", "also-one", "idle"}
    assert server["busy"][2] == 1, server
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(queue_path()))
    # The tile and the tab count the groups (DQ.STATS groups).
    assert browser.find_element(By.ID, "count-groups").text == "6"
    browser.find_element(By.ID, "tab-groups").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "group-table")))
    assert "tab=groups" in browser.current_url
    assert browser.find_element(By.CSS_SELECTOR, "#tab-groups.active .n").text == "6"
    names = shown_names(browser)
    assert names == by_backlog(server), (names, server)
    assert names[0] == "big" and names[-1] == "idle"
    for row in shown_rows(browser):
        waiting, ready, inflight, paused = server[row.get_attribute("data-group")]
        cell = lambda css: row.find_element(By.CSS_SELECTOR, css).text  # noqa: E731
        assert (int(cell("td.waiting")), int(cell("td.ready")), int(cell("td.inflight"))) == (waiting, ready, inflight)
        if paused is None:
            assert cell("td.paused") == "no"
        elif paused == -1:
            assert cell("td.paused") == "paused until resumed"
        else:
            assert cell("td.paused").startswith("paused until "), cell("td.paused")
    by_name = {row.get_attribute("data-group"): row for row in shown_rows(browser)}
    # Resume only where a group is paused; Pause everywhere.
    assert by_name["mid"].find_elements(By.XPATH, ".//button[normalize-space()='Resume']")
    assert by_name["idle"].find_elements(By.XPATH, ".//button[normalize-space()='Resume']")
    assert not by_name["big"].find_elements(By.XPATH, ".//button[normalize-space()='Resume']")
    assert all(row.find_elements(By.XPATH, ".//button[normalize-space()='Pause']") for row in shown_rows(browser))
    assert browser.find_element(By.ID, "group-pager").text.startswith("Showing 1–6 of 6 groups")
    assert not browser.find_elements(By.ID, "groups-cut")
    screenshot(browser, "queue-groups")

    # The message tabs still list messages, and leave the groups tab.
    browser.find_element(By.ID, "tab-ready").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "messages")))
    assert not browser.find_elements(By.ID, "group-table")
    # A bad tab or page is a 400.
    http = Http(dashboard.base)
    assert http.get(queue_path() + "?tab=nope")[0] == 400
    assert http.get(groups_path(extra="&page=0"))[0] == 400
    assert http.get(groups_path(extra="&page=x"))[0] == 400


def test_a_queue_without_groups_says_so(r, dashboard, browser):
    r.execute_command("DQ.ADD", "plain", "x")
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(groups_path("plain")))
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "no-groups"))).text.startswith("No groups")
    assert browser.find_element(By.ID, "count-groups").text == "0"


def test_the_filter_takes_a_part_of_the_name_or_a_glob(r, dashboard, browser):
    for name in ("tenant-1", "tenant-2", "tenant-10", "tenant-12", "other-1", "a*b", "axb"):
        add(r, "orders", name, 1)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(groups_path()))
    wait(browser).until(EC.presence_of_element_located((By.ID, "group-filter-box")))

    def filter_by(text):
        box = browser.find_element(By.ID, "group-filter-box")
        box.clear()
        box.send_keys(text)
        old = browser.find_element(By.TAG_NAME, "html")
        browser.find_element(By.ID, "group-filter-apply").click()
        wait(browser).until(left_the_page(old))
        assert wait(browser).until(EC.presence_of_element_located((By.ID, "group-filter-box"))).get_attribute(
            "value") == text
        return sorted(shown_names(browser))

    # A part of the name.
    assert filter_by("nt-1") == ["tenant-1", "tenant-10", "tenant-12"]
    assert filter_by("-1") == ["other-1", "tenant-1", "tenant-10", "tenant-12"]
    # With glob characters: a glob, as DQ.GROUPS MATCH takes.
    assert filter_by("tenant-?") == ["tenant-1", "tenant-2"]
    assert filter_by("a*b") == ["a*b", "axb"]
    assert filter_by("a\\*b") == ["a*b"]
    assert filter_by("nothing-like-it") == []
    assert browser.find_element(By.ID, "no-groups").text == "No group matches the filter."
    browser.find_element(By.ID, "group-filter-clear").click()
    wait(browser).until(lambda b: "group=" not in b.current_url)
    assert len(shown_rows(browser)) == 7


def test_more_groups_than_a_page_are_paged_by_backlog(r, dashboard, browser):
    r.execute_command("DQ.CONFIG", "orders", "SET", "GROUPLIMIT", 100)
    pipe = r.pipeline(transaction=False)
    for i in range(120):
        for k in range(i % 7 + 1):
            pipe.execute_command("DQ.ADD", "orders", "x", "GROUP", f"g{i:03}")
    pipe.execute()
    expected = by_backlog(groups(r, "orders"))
    assert len(expected) == 120
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(groups_path()))
    wait(browser).until(EC.presence_of_element_located((By.ID, "group-table")))
    assert shown_names(browser) == expected[:50]
    pager = browser.find_element(By.ID, "group-pager")
    assert pager.text.startswith("Showing 1–50 of 120 groups")
    pager.find_element(By.CSS_SELECTOR, "a.next").click()
    wait(browser).until(EC.url_contains("page=2"))
    assert shown_names(browser) == expected[50:100]
    browser.find_element(By.CSS_SELECTOR, "#group-pager a.page[href$='page=3']").click()
    wait(browser).until(EC.url_contains("page=3"))
    assert shown_names(browser) == expected[100:]
    assert browser.find_element(By.ID, "group-pager").text.startswith("Showing 101–120 of 120 groups")
    # The filter travels with the pages.
    browser.get(dashboard.url(groups_path(extra="&group=g0")))
    wait(browser).until(EC.presence_of_element_located((By.ID, "group-table")))
    filtered = [n for n in expected if "g0" in n]
    assert len(filtered) == 100 and shown_names(browser) == filtered[:50]
    browser.find_element(By.CSS_SELECTOR, "#group-pager a.next").click()
    wait(browser).until(EC.url_contains("page=2"))
    assert "group=g0" in browser.current_url
    assert shown_names(browser) == filtered[50:]
    # A page past the last shows the last.
    browser.get(dashboard.url(groups_path(extra="&page=9")))
    assert shown_names(browser) == expected[100:]


def test_beyond_the_bound_the_tab_reads_the_first_10000_by_name_and_says_so(r, dashboard, browser):
    pipe = r.pipeline(transaction=False)
    for i in range(10_001):
        pipe.execute_command("DQ.ADD", "orders", "x", "GROUP", f"t{i:05}")
    pipe.execute()
    add(r, "orders", "t10000", 2, prefix="extra")  # the most backlog, but past the bound
    no_autorefresh(browser, dashboard.base)
    r.config_resetstat()
    browser.get(dashboard.url(groups_path()))
    cut = wait(browser).until(EC.presence_of_element_located((By.ID, "groups-cut"))).text
    assert cut.startswith("Showing the first 10,000 groups by name"), cut
    # At most ten DQ.GROUPS COUNT 1000 for the page.
    assert command_calls(r, "dq.groups") == (10,)
    assert browser.find_element(By.ID, "group-pager").text.startswith("Showing 1–50 of 10,000 groups")
    assert shown_names(browser) == [f"t{i:05}" for i in range(50)]
    assert browser.find_element(By.ID, "count-groups").text == "10,001"


# --- pause and resume ---------------------------------------------------------------------


def test_pausing_a_group_is_confirmed_holds_it_and_resume_releases_it(r, dashboard, browser):
    add(r, "orders", "acme", 2)
    add(r, "orders", "zen", 1)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(groups_path()))
    row = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-group="acme"]')))
    row.find_element(By.CSS_SELECTOR, "input.group-pause-for").send_keys("10m")
    row.find_element(By.XPATH, ".//button[normalize-space()='Pause']").click()
    question = wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text
    assert question.startswith("Pause group acme of queue orders for 10m? POP delivers none of its messages"), question
    assert groups(r, "orders")["acme"][3] is None, "nothing before the confirmation"
    screenshot(browser, "confirm-group-pause")
    before = int(time.time() * 1000)
    browser.find_element(By.ID, "confirm").click()
    result = wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text
    after = int(time.time() * 1000)
    assert result.startswith("Paused group acme of queue orders for 10m, until "), result
    assert result.endswith("(DQ.PAUSE replied OK).")
    paused = groups(r, "orders")["acme"][3]
    assert before + 600_000 <= paused <= after + 600_000
    # Held: a POP gets zen's message, none of acme's.
    assert popped_ids(r, "orders") == ["zen-0"]
    assert popped_ids(r, "orders") == []

    # Back on the groups tab: paused, with a Resume.
    browser.find_element(By.LINK_TEXT, "Back").click()
    row = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-group="acme"]')))
    assert row.find_element(By.CSS_SELECTOR, "td.paused").text.startswith("paused until ")
    row.find_element(By.XPATH, ".//button[normalize-space()='Resume']").click()
    question = wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text
    assert question.startswith("Resume group acme of queue orders?"), question
    assert groups(r, "orders")["acme"][3] is not None
    browser.find_element(By.ID, "confirm").click()
    result = wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text
    assert result == "Resumed group acme of queue orders (DQ.RESUME replied 1)."
    assert groups(r, "orders")["acme"][3] is None
    # Released: acme's first message goes (GROUPLIMIT 1: one at a time).
    assert until(lambda: popped_ids(r, "orders"), "acme's message after the resume") == ["acme-0"]

    # Until resumed (an empty length); resuming one not paused says so.
    browser.get(dashboard.url(groups_path()))
    row = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-group="acme"]')))
    row.find_element(By.XPATH, ".//button[normalize-space()='Pause']").click()
    assert "Pause group acme of queue orders until resumed?" in wait(browser).until(
        EC.presence_of_element_located((By.ID, "question"))).text
    browser.find_element(By.ID, "confirm").click()
    assert wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text == \
        "Paused group acme of queue orders until resumed (DQ.PAUSE replied OK)."
    assert groups(r, "orders")["acme"][3] == -1
    r.execute_command("DQ.RESUME", "orders", "GROUP", "acme")
    http = Http(dashboard.base)
    token = csrf_of(http.get(groups_path())[1])
    status, body, _ = http.post(queue_path() + "/action", {"op": "group-resume", "group": "acme", "csrf": token,
                                                           "confirm": "yes"}, headers={"Origin": dashboard.base})
    assert status == 200 and "Group acme of queue orders was not paused (DQ.RESUME replied 0)." in body


def test_group_names_of_any_bytes_round_trip(r, dashboard, browser):
    name = b"a/b?c#d %25<i>"
    r.execute_command("DQ.ADD", "orders", "x", "GROUP", name)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(groups_path()))
    row = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#group-table tbody tr")))
    assert row.find_element(By.CSS_SELECTOR, "td.group-name").text == name.decode()
    row.find_element(By.XPATH, ".//button[normalize-space()='Pause']").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "confirm"))).click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "result")))
    assert groups(r, "orders")[name.decode()][3] == -1


def test_a_bad_group_form_changes_nothing(r, dashboard):
    add(r, "orders", "acme", 1)
    http = Http(dashboard.base)
    token = csrf_of(http.get(groups_path())[1])
    origin = {"Origin": dashboard.base}
    for bad in ({"op": "group-pause"}, {"op": "group-pause", "group": ""}, {"op": "group-resume", "group": "x" * 1025}):
        status, body, _ = http.post(queue_path() + "/action", {**bad, "csrf": token, "confirm": "yes"}, headers=origin)
        assert status == 400 and "Bad form" in body, bad
    status, body, _ = http.post(queue_path() + "/action", {"op": "group-pause", "group": "acme", "for": "soon",
                                                           "csrf": token, "confirm": "yes"}, headers=origin)
    assert status == 400 and "Bad pause length" in body
    assert groups(r, "orders")["acme"][3] is None


def test_csrf_and_origin_guard_a_groups_pause_and_resume(r, dashboard):
    add(r, "orders", "acme", 1)
    r.execute_command("DQ.PAUSE", "orders", "GROUP", "held")
    path = queue_path()
    http = Http(dashboard.base)
    token = csrf_of(http.get(groups_path())[1])
    for form in ({"op": "group-pause", "group": "acme"}, {"op": "group-pause", "group": "acme", "for": "1m"},
                 {"op": "group-resume", "group": "held"}):
        form = {**form, "confirm": "yes"}
        # No token, a wrong token, a token without its cookie, a foreign origin.
        assert http.post(path + "/action", form, headers={"Origin": dashboard.base})[0] == 403, form
        assert http.post(path + "/action", {**form, "csrf": "0" * 64})[0] == 403, form
        assert Http(dashboard.base).post(path + "/action", {**form, "csrf": token})[0] == 403, form
        assert http.post(path + "/action", {**form, "csrf": token}, headers={"Origin": "http://evil.example"})[0] == 403
        assert http.get(path + "/action?" + "&".join(f"{k}={v}" for k, v in form.items()))[0] == 405
        gs = groups(r, "orders")
        assert gs["acme"][3] is None and gs["held"][3] == -1, form
    # Right token, right origin: done.
    status, body, _ = http.post(path + "/action", {"op": "group-pause", "group": "acme", "csrf": token, "confirm": "yes"},
                                headers={"Origin": dashboard.base})
    assert status == 200 and groups(r, "orders")["acme"][3] == -1


def test_read_only_lists_the_groups_without_buttons_and_refuses_their_actions(r, start_dashboard, browser):
    add(r, "orders", "acme", 2)
    r.execute_command("DQ.PAUSE", "orders", "GROUP", "held")
    d = start_dashboard("--redis", redis_url(), "--read-only")
    no_autorefresh(browser, d.base)
    browser.get(d.url(groups_path()))
    wait(browser).until(EC.presence_of_element_located((By.ID, "group-table")))
    assert sorted(shown_names(browser)) == ["acme", "held"]
    # The one button is the filter's (a GET).
    assert [b.get_attribute("id") for b in browser.find_elements(By.TAG_NAME, "button")] == ["group-filter-apply"]
    assert not browser.find_elements(By.CSS_SELECTOR, "form[method=post]")
    assert not browser.find_elements(By.CSS_SELECTOR, "input.group-pause-for")
    # The filter (a GET) still works.
    assert browser.find_elements(By.ID, "group-filter-box")
    http = Http(d.base)
    http.get(groups_path())
    for form in ({"op": "group-pause", "group": "acme"}, {"op": "group-resume", "group": "held"}):
        status, body, _ = http.post(queue_path() + "/action", {**form, "confirm": "yes", "csrf": "x"},
                                    headers={"Origin": d.base})
        assert status == 403 and "read-only" in body, form
    gs = groups(r, "orders")
    assert gs["acme"][3] is None and gs["held"][3] == -1


# --- settings ---------------------------------------------------------------------------


def test_the_settings_show_group_limit_group_rate_and_order(r, dashboard, browser):
    add(r, "orders", "acme", 1)
    no_autorefresh(browser, dashboard.base)
    browser.get(dashboard.url(queue_path()))
    wait(browser).until(EC.presence_of_element_located((By.ID, "settings")))
    assert browser.find_element(By.ID, "group-limit").text == "1 per group"
    assert browser.find_element(By.ID, "group-rate").text == "none"
    assert browser.find_element(By.ID, "order").text.startswith("priority")
    r.execute_command("DQ.CONFIG", "orders", "SET", "GROUPLIMIT", 3, "GROUPRATE", "10/1s", "ORDER", "FAIR")
    browser.refresh()
    assert browser.find_element(By.ID, "group-limit").text == "3 per group"
    assert browser.find_element(By.ID, "group-rate").text == "10/1s at most 10 deliveries per group in any 1s (GROUPRATE)"
    assert browser.find_element(By.ID, "order").text == "fair (the groups in turn)"
    screenshot(browser, "queue-group-settings")


# --- a sharded queue --------------------------------------------------------------------------


def shard_of(group, shards):
    """docs/sharding.md: a group's messages go to shard crc32(group) % N."""
    return zlib.crc32(group.encode()) % shards


def test_a_sharded_queues_groups_are_listed_from_every_shard_and_paused_on_theirs(start_dashboard, browser):
    cluster = Cluster(cluster_nodes())
    cluster.flushall()
    try:
        names = shard_names("jobs", 4)
        homes = [cluster.node_of(n) for n in names]
        tenants = [f"tenant-{i}" for i in range(12)]
        # As a ShardedQueue adds them: each group on its shard, tenant-i with i+1 messages.
        for i, t in enumerate(tenants):
            shard = names[shard_of(t, 4)]
            for k in range(i + 1):
                cluster("DQ.ADD", shard, "x", "ID", f"{t}-{k}", "GROUP", t)
        used = {shard_of(t, 4) for t in tenants}
        assert len(used) >= 2, "the groups spread over the shards"
        page_shard = sorted(used)[0]
        d = start_dashboard("--redis", f"redis://{cluster.nodes[0]}")
        no_autorefresh(browser, d.base)
        browser.get(d.url(f"/q/{q(homes[page_shard])}/{q(names[page_shard])}?tab=groups"))
        wait(browser).until(EC.presence_of_element_located((By.ID, "group-table")))
        assert browser.find_element(By.ID, "groups-shard-note").text.startswith(
            "The groups of every shard of sharded queue jobs")
        # Every shard's groups, by backlog (GROUPLIMIT 1: 1 ready, the rest waiting).
        assert shown_names(browser) == list(reversed(tenants))
        for row in shown_rows(browser):
            t = row.get_attribute("data-group")
            assert row.find_element(By.CSS_SELECTOR, "td.shard").text == names[shard_of(t, 4)]
        screenshot(browser, "sharded-queue-groups")

        # Pause a group held by another shard than this page's: its shard is paused, no other.
        other = next(t for t in tenants if shard_of(t, 4) != page_shard)
        home = names[shard_of(other, 4)]
        row = browser.find_element(By.CSS_SELECTOR, f'tr[data-group="{other}"]')
        row.find_element(By.XPATH, ".//button[normalize-space()='Pause']").click()
        question = wait(browser).until(EC.presence_of_element_located((By.ID, "question"))).text
        assert question.startswith(f"Pause group {other} of sharded queue jobs (on its shard {home}) until resumed?"), \
            question
        browser.find_element(By.ID, "confirm").click()
        result = wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text
        assert result == f"Paused group {other} of sharded queue jobs (on its shard {home}) until resumed " \
                         f"(DQ.PAUSE replied OK)."
        assert groups(cluster.client(home), home)[other][3] == -1
        for n in names:
            if n != home:
                assert other not in groups(cluster.client(n), n), n
        browser.find_element(By.LINK_TEXT, "Back").click()
        row = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-group="{other}"]')))
        row.find_element(By.XPATH, ".//button[normalize-space()='Resume']").click()
        wait(browser).until(EC.presence_of_element_located((By.ID, "confirm"))).click()
        result = wait(browser).until(EC.presence_of_element_located((By.ID, "result"))).text
        assert result == f"Resumed group {other} of sharded queue jobs (on its shard {home}) (DQ.RESUME replied 1)."
        assert groups(cluster.client(home), home)[other][3] is None
    finally:
        cluster.close()
