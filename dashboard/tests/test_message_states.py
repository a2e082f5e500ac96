"""The queue page's message lists say each message's state and what its
time means. The "all" tab (DQ.SCAN without STATE, which does not say an
entry's state) has a state column; every tab says "due …", "lease ends …"
or "died …" instead of a bare time, where "now" said nothing of which.
Run by scripts/test-dashboard under scripts/with-servers."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import get, no_autorefresh, q, redis_url, screenshot, server_name
from test_flow_and_schedules import shard_names

WAIT = 15

# Each message's state, and how its time must read on the page.
EXPECTED = {
    "ready-one": ("ready", "due "),
    "delayed-one": ("delayed", "due in "),
    "inflight-one": ("inflight", "lease ends in "),
    "dead-one": ("dead", "died "),
}


def one_of_each(r, queue):
    """A ready, a delayed, an in-flight and a dead message in `queue`, the
    dead one just dead and the ready one just due: the two a bare "now"
    showed alike."""
    r.execute_command("DQ.ADD", queue, "waiting", "ID", "ready-one")
    r.execute_command("DQ.ADD", queue, "later", "DELAY", 3_600_000, "ID", "delayed-one")
    r.execute_command("DQ.ADD", queue, "busy", "ID", "inflight-one", "PRIORITY", 5)
    r.execute_command("DQ.ADD", queue, "bad", "ID", "dead-one", "PRIORITY", 10)
    popped = r.execute_command("DQ.POP", queue, "COUNT", 2, "LEASE", 600_000)
    assert [e[0] for e in popped] == [b"dead-one", b"inflight-one"]
    assert r.execute_command("DQ.NACK", queue, "dead-one", "DEAD", "ERROR", "HTTP 410 Gone") == b"dead"
    for id_, (state, _) in EXPECTED.items():
        assert get(r, queue, id_)["state"] == state.encode(), id_


def rows(browser):
    """The message list as {id: (state cell, time cell)}; the state cell
    is None where the list has no state column."""
    out = {}
    for tr in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr"):
        id_ = tr.find_element(By.CSS_SELECTOR, "td.id a").text
        states = tr.find_elements(By.CSS_SELECTOR, "td.state")
        out[id_] = (states[0].text if states else None, tr.find_element(By.CSS_SELECTOR, "td.time").text)
    return out


# The same page for a queue and for a shard of a sharded queue (which, off
# a cluster, lives whole on its server).
@pytest.mark.parametrize("queue", ["orders", shard_names("jobs", 2)[0]])
def test_the_all_tab_shows_each_messages_state_and_what_its_time_means(r, dashboard, browser, queue):
    one_of_each(r, queue)
    no_autorefresh(browser, dashboard.base)
    base = dashboard.url(f"/q/{q(server_name(redis_url()))}/{q(queue)}")
    browser.get(base)
    WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "messages")))
    if "~" in queue:
        assert browser.find_element(By.ID, "shard-note").text.startswith("Shard 0 of the 2 shards")
    heads = [th.text.lower() for th in browser.find_elements(By.CSS_SELECTOR, "#messages thead th")]
    assert "state" in heads and "when" in heads, heads

    got = rows(browser)
    assert set(got) == set(EXPECTED), got
    for id_, (state, when) in EXPECTED.items():
        shown_state, shown_when = got[id_]
        assert shown_state == state, (id_, got[id_])
        assert shown_when.startswith(when), (id_, got[id_])
    # The cell's title is the time itself.
    died = browser.find_element(By.XPATH, "//tr[td[@class='id']/a[text()='dead-one']]/td[contains(@class,'time')]")
    assert died.get_attribute("title").startswith("died at "), died.get_attribute("title")
    if "~" not in queue:
        screenshot(browser, "queue-all-states")

    # A tab of one state says its state once, in the tab; its times still
    # say what they are. So does "next to leave" (DQ.PEEK).
    for id_, (state, when) in EXPECTED.items():
        for order in ("", "&order=next"):
            browser.get(f"{base}?state={state}{order}")
            WebDriverWait(browser, WAIT).until(EC.presence_of_element_located((By.ID, "messages")))
            assert rows(browser) == {id_: (None, rows(browser)[id_][1])}, (state, order)
            assert rows(browser)[id_][1].startswith(when), (state, order, rows(browser))
