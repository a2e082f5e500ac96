//! `/metrics`: every server's totals and `INFO dq`, and the series of the
//! queues chosen, in the OpenMetrics text format. Read at each scrape (so
//! the values are the server's now, not a sample's) with one DQ.QUEUES
//! WITHSTATS and one INFO dq per server, however many queues it holds.
//!
//! Totals are always there; a queue's own series are there when it is
//! chosen: by `--metrics-queues` (every queue unless given), narrowed by
//! the scrape's `?queue=GLOB`, and at most `--metrics-max-queues` of them
//! (by name), `dq_metrics_queues_omitted` counting the rest. At 10,000
//! queues a series per queue and counter would make a 10 MB scrape and
//! 160,000 series; the totals make some 20 lines per server.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::AtomicU64;

use dq_client::Stats;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::backend::ServerSnap;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerStateLabels {
    server: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    server: String,
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    server: String,
    queue: String,
    state: &'static str,
}

type FGauge = Gauge<f64, AtomicU64>;

/// Which queues get series of their own.
#[derive(Clone, Debug)]
pub struct Selection {
    /// `--metrics-queues`: a queue matching any of these globs; none given,
    /// every queue.
    pub patterns: Vec<Vec<u8>>,
    /// `--metrics-max-queues`: at most this many (0: none, totals only).
    pub max_queues: usize,
}

/// The metric name of a DQ.STATS counter: `lease-expired` → `dq_lease_expired`
/// (the text adds `_total`).
pub fn counter_name(field: &str) -> String {
    format!("dq_{}", field.replace('-', "_"))
}

fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A queue as a scrape sees it: its server, name and DQ.STATS.
type QueueRef<'a> = (&'a str, &'a [u8], &'a Stats);

/// DQ.STATS' lifetime counters as dq-client lists them, but `throttled`,
/// which is exported with the flow control, under a help text of its own
/// (and must not make a second family of one name).
fn lifetime_counters(s: &Stats) -> impl Iterator<Item = (&'static str, u64)> {
    s.counters()
        .into_iter()
        .filter(|(name, _)| *name != "throttled")
}

/// A counter family per lifetime counter, labelled by `L`.
fn counter_families<L: Clone + Hash + Eq>() -> Vec<(&'static str, Family<L, Counter>)> {
    lifetime_counters(&Stats::default())
        .map(|(name, _)| (name, Family::default()))
        .collect()
}

/// The queues that get series of their own: those `selection` and the
/// scrape's `scrape` globs (any of them; none given, all) choose, by name
/// then server, at most `selection.max_queues`; and how many chosen queues
/// each server had left out by that cap.
fn chosen<'a>(
    snaps: &'a [ServerSnap],
    selection: &Selection,
    scrape: &[Vec<u8>],
) -> (Vec<QueueRef<'a>>, HashMap<&'a str, u64>) {
    let picks = |patterns: &[Vec<u8>], name: &[u8]| {
        patterns.is_empty() || patterns.iter().any(|p| dq_glob::matches(p, name))
    };
    let mut queues: Vec<QueueRef> = snaps
        .iter()
        .flat_map(|snap| {
            let addr = snap.addr.as_str();
            snap.queues
                .iter()
                .map(move |(name, stats)| (addr, name.as_slice(), stats))
        })
        .filter(|(_, name, _)| picks(&selection.patterns, name) && picks(scrape, name))
        .collect();
    let mut omitted: HashMap<&str, u64> = HashMap::new();
    if queues.len() > selection.max_queues {
        // By name, so that the same queues keep their series from scrape
        // to scrape while the set of queues stays the same.
        queues.sort_unstable_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
        for (server, _, _) in queues.drain(selection.max_queues..) {
            *omitted.entry(server).or_default() += 1;
        }
    }
    (queues, omitted)
}

pub fn render(snaps: &[ServerSnap], selection: &Selection, scrape: &[Vec<u8>]) -> String {
    let mut registry = Registry::default();
    let up = Family::<ServerLabels, Gauge>::default();
    let ticks = Family::<ServerLabels, Counter>::default();
    let continued = Family::<ServerLabels, Counter>::default();
    let lateness = Family::<ServerLabels, FGauge>::default();
    let longest = Family::<ServerLabels, FGauge>::default();
    let server_queues = Family::<ServerLabels, Gauge>::default();
    let server_messages = Family::<ServerStateLabels, Gauge>::default();
    let server_oldest = Family::<ServerLabels, FGauge>::default();
    let omitted_family = Family::<ServerLabels, Gauge>::default();
    let server_counters = counter_families::<ServerLabels>();
    let server_paused = Family::<ServerLabels, Gauge>::default();
    let server_throttled = Family::<ServerLabels, Counter>::default();
    let server_schedules = Family::<ServerLabels, Gauge>::default();
    let schedule_runs = Family::<ServerLabels, Counter>::default();
    let messages = Family::<StateLabels, Gauge>::default();
    let oldest = Family::<QueueLabels, FGauge>::default();
    let counters = counter_families::<QueueLabels>();
    let paused = Family::<QueueLabels, Gauge>::default();
    let paused_until = Family::<QueueLabels, FGauge>::default();
    let rate_deliveries = Family::<QueueLabels, Gauge>::default();
    let rate_window = Family::<QueueLabels, FGauge>::default();
    let max_inflight = Family::<QueueLabels, Gauge>::default();
    let schedules = Family::<QueueLabels, Gauge>::default();
    let throttled = Family::<QueueLabels, Counter>::default();

    let (queues, omitted) = chosen(snaps, selection, scrape);
    for snap in snaps {
        let server = ServerLabels {
            server: snap.addr.clone(),
        };
        up.get_or_create(&server)
            .set(i64::from(snap.error.is_none()));
        if let Some(info) = &snap.info {
            if let Some(n) = info.int("timer_ticks") {
                ticks.get_or_create(&server).inc_by(n);
            }
            if let Some(n) = info.int("ticks_continued") {
                continued.get_or_create(&server).inc_by(n);
            }
            if let Some(ms) = info.int("lateness_ms") {
                lateness.get_or_create(&server).set(ms as f64 / 1000.0);
            }
            if let Some(us) = info.int("longest_tick_us") {
                longest.get_or_create(&server).set(us as f64 / 1e6);
            }
            if let Some(n) = info.int("schedule_runs") {
                schedule_runs.get_or_create(&server).inc_by(n);
            }
        }
        // A server not read in full has no totals this scrape: a missing
        // series, rather than a sum that looks like a drop.
        if snap.error.is_some() {
            continue;
        }
        let mut total = Stats::default();
        let mut queues_paused = 0u64;
        for (_, s) in &snap.queues {
            queues_paused += u64::from(s.paused);
            total.accumulate(s);
        }
        server_queues
            .get_or_create(&server)
            .set(gauge_value(snap.queues.len() as u64));
        for state in dq_client::State::ALL {
            server_messages
                .get_or_create(&ServerStateLabels {
                    server: snap.addr.clone(),
                    state: state.as_str(),
                })
                .set(gauge_value(total.count(state)));
        }
        server_oldest
            .get_or_create(&server)
            .set(total.oldest_ready_age_ms.unwrap_or(0) as f64 / 1000.0);
        for ((_, value), (_, family)) in lifetime_counters(&total).zip(&server_counters) {
            family.get_or_create(&server).inc_by(value);
        }
        server_paused
            .get_or_create(&server)
            .set(gauge_value(queues_paused));
        server_throttled
            .get_or_create(&server)
            .inc_by(total.throttled);
        server_schedules
            .get_or_create(&server)
            .set(gauge_value(total.schedules));
        omitted_family.get_or_create(&server).set(gauge_value(
            omitted.get(snap.addr.as_str()).copied().unwrap_or(0),
        ));
    }
    for (addr, name, stats) in queues {
        let queue = String::from_utf8_lossy(name).into_owned();
        let q = QueueLabels {
            server: addr.to_string(),
            queue: queue.clone(),
        };
        for state in dq_client::State::ALL {
            messages
                .get_or_create(&StateLabels {
                    server: addr.to_string(),
                    queue: queue.clone(),
                    state: state.as_str(),
                })
                .set(gauge_value(stats.count(state)));
        }
        oldest
            .get_or_create(&q)
            .set(stats.oldest_ready_age_ms.unwrap_or(0) as f64 / 1000.0);
        for ((_, value), (_, family)) in lifetime_counters(stats).zip(&counters) {
            family.get_or_create(&q).inc_by(value);
        }
        paused.get_or_create(&q).set(i64::from(stats.paused));
        if let Some(until) = stats.paused_until {
            paused_until.get_or_create(&q).set(until as f64 / 1000.0);
        }
        // A limit's series exist while it does: `dq_messages{state=
        // "inflight"} >= on(server, queue) dq_max_inflight` then compares
        // the limited queues only, with no "0 means none" to filter out.
        if let Some(rate) = stats.rate_limit() {
            rate_deliveries
                .get_or_create(&q)
                .set(gauge_value(rate.deliveries));
            rate_window
                .get_or_create(&q)
                .set(rate.window.as_millis() as f64 / 1000.0);
        }
        if let Some(m) = stats.max_inflight {
            max_inflight.get_or_create(&q).set(gauge_value(m));
        }
        schedules
            .get_or_create(&q)
            .set(gauge_value(stats.schedules));
        throttled.get_or_create(&q).inc_by(stats.throttled);
    }

    registry.register(
        "dq_server_up",
        "1 when the server answered INFO dq and DQ.QUEUES WITHSTATS this scrape",
        up,
    );
    registry.register(
        "dq_timer_ticks",
        "Timer ticks run since the module loaded (INFO dq: dq_timer_ticks)",
        ticks,
    );
    registry.register(
        "dq_timer_ticks_continued",
        "Ticks that went on with work the previous tick left (INFO dq: dq_ticks_continued)",
        continued,
    );
    registry.register(
        "dq_timer_lateness_seconds",
        "How long the most overdue timed work has waited; 0 while the timer keeps up \
         (INFO dq: dq_lateness_ms)",
        lateness,
    );
    registry.register(
        "dq_timer_longest_tick_seconds",
        "The longest timer tick so far: the main-thread pause (INFO dq: dq_longest_tick_us)",
        longest,
    );
    registry.register(
        "dq_server_queues",
        "Queues of the server's database (DQ.QUEUES)",
        server_queues,
    );
    registry.register(
        "dq_server_messages",
        "Messages in each state now, summed over the server's queues",
        server_messages,
    );
    registry.register(
        "dq_server_oldest_ready_age_seconds",
        "The longest lag of the server's queues: the oldest ready age of the queue that lags \
         most; 0 when nothing is ready",
        server_oldest,
    );
    for (field, family) in server_counters {
        registry.register(
            format!("dq_server_{}", field.replace('-', "_")),
            format!("DQ.STATS {field}, summed over the server's queues"),
            family,
        );
    }
    registry.register(
        "dq_server_queues_paused",
        "Queues of the server paused now (DQ.PAUSE)",
        server_paused,
    );
    registry.register(
        "dq_server_throttled",
        "DQ.STATS throttled, summed over the server's queues: POPs that delivered fewer \
         than they asked (and than were ready) because of a pause, RATE or MAXINFLIGHT",
        server_throttled,
    );
    registry.register(
        "dq_server_schedules",
        "Recurring schedules of the server's queues (DQ.STATS schedules, summed)",
        server_schedules,
    );
    registry.register(
        "dq_schedule_runs",
        "Schedule runs made since the module loaded (INFO dq: dq_schedule_runs)",
        schedule_runs,
    );
    registry.register(
        "dq_metrics_queues_omitted",
        "Queues chosen for series of their own (--metrics-queues, ?queue=) but left out by \
         --metrics-max-queues",
        omitted_family,
    );
    registry.register(
        "dq_messages",
        "Messages in each state now (DQ.STATS)",
        messages,
    );
    registry.register(
        "dq_oldest_ready_age_seconds",
        "How long the earliest-due ready message has been due: the queue's lag; 0 when \
         nothing is ready (DQ.STATS oldest-ready-age-ms)",
        oldest,
    );
    for (field, family) in counters {
        registry.register(
            counter_name(field),
            format!("DQ.STATS {field}: lifetime count of the queue"),
            family,
        );
    }
    registry.register(
        "dq_throttled",
        "DQ.STATS throttled: POPs that delivered fewer than they asked (and than were ready) \
         because of a pause, RATE or MAXINFLIGHT",
        throttled,
    );
    registry.register(
        "dq_paused",
        "1 while DQ.PAUSE holds the queue, else 0",
        paused,
    );
    registry.register(
        "dq_paused_until_timestamp_seconds",
        "When the queue's DQ.PAUSE FOR ends (Unix time); no series when paused until \
         DQ.RESUME or not paused",
        paused_until,
    );
    registry.register(
        "dq_rate_limit_deliveries",
        "The queue's RATE n/window: n, the most deliveries in any window; no series without \
         a RATE (deliveries per second: dq_rate_limit_deliveries / dq_rate_limit_window_seconds)",
        rate_deliveries,
    );
    registry.register(
        "dq_rate_limit_window_seconds",
        "The queue's RATE n/window: the window; no series without a RATE",
        rate_window,
    );
    registry.register(
        "dq_max_inflight",
        "The queue's MAXINFLIGHT: the most messages in flight at once; no series without one",
        max_inflight,
    );
    registry.register(
        "dq_schedules",
        "Recurring schedules the queue holds (DQ.STATS schedules)",
        schedules,
    );
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_snap;
    use dq_client::{InfoDq, Stats};

    #[test]
    fn queues_and_servers_are_rendered() {
        let orders = Stats {
            ready: 3,
            dead: 1,
            added: 10,
            lease_expired: 2,
            oldest_ready_age_ms: Some(1500),
            ..Stats::default()
        };
        let mut snap = test_snap("127.0.0.1:6379", [("orders\"x", orders)]);
        snap.info = Some(dq_client::admin::parse_info_dq(
            "dq_timer_ticks:42\r\ndq_lateness_ms:250\r\n",
        ));
        let snaps = vec![snap];
        let text = render(&snaps, &every(), &[]);
        for line in [
            r#"dq_messages{server="127.0.0.1:6379",queue="orders\"x",state="ready"} 3"#,
            r#"dq_messages{server="127.0.0.1:6379",queue="orders\"x",state="dead"} 1"#,
            r#"dq_added_total{server="127.0.0.1:6379",queue="orders\"x"} 10"#,
            r#"dq_lease_expired_total{server="127.0.0.1:6379",queue="orders\"x"} 2"#,
            r#"dq_oldest_ready_age_seconds{server="127.0.0.1:6379",queue="orders\"x"} 1.5"#,
            r#"dq_timer_ticks_total{server="127.0.0.1:6379"} 42"#,
            r#"dq_timer_lateness_seconds{server="127.0.0.1:6379"} 0.25"#,
            r#"dq_server_up{server="127.0.0.1:6379"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        let _ = InfoDq::default();
    }

    fn every() -> Selection {
        Selection {
            patterns: Vec::new(),
            max_queues: usize::MAX,
        }
    }

    fn server(addr: &str, queues: &[(&'static str, u64, u64)]) -> ServerSnap {
        let stats = |ready: u64, acked| Stats {
            ready,
            acked,
            oldest_ready_age_ms: (ready > 0).then_some(ready * 1000),
            ..Stats::default()
        };
        test_snap(addr, queues.iter().map(|&(n, r, a)| (n, stats(r, a))))
    }

    fn queue_lines(text: &str) -> Vec<String> {
        let mut q: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("dq_messages{") && l.contains("state=\"ready\""))
            .map(|l| l.to_string())
            .collect();
        q.sort();
        q
    }

    #[test]
    fn totals_always_and_per_queue_series_as_chosen() {
        let snaps = vec![
            server(
                "a:1",
                &[("orders", 3, 10), ("emails", 1, 5), ("orders-eu", 2, 0)],
            ),
            server("b:2", &[("orders", 4, 1)]),
        ];
        let text = render(&snaps, &every(), &[]);
        for line in [
            r#"dq_server_messages{server="a:1",state="ready"} 6"#,
            r#"dq_server_messages{server="b:2",state="ready"} 4"#,
            r#"dq_server_acked_total{server="a:1"} 15"#,
            r#"dq_server_queues{server="a:1"} 3"#,
            r#"dq_server_oldest_ready_age_seconds{server="a:1"} 3.0"#,
            r#"dq_metrics_queues_omitted{server="a:1"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        assert_eq!(queue_lines(&text).len(), 4);

        // --metrics-queues: only those; the totals stay whole.
        let orders = Selection {
            patterns: vec![b"orders*".to_vec()],
            max_queues: usize::MAX,
        };
        let text = render(&snaps, &orders, &[]);
        assert_eq!(queue_lines(&text).len(), 3);
        assert!(!text.contains(r#"queue="emails""#));
        assert!(text.contains(r#"dq_server_messages{server="a:1",state="ready"} 6"#));
        // ?queue= narrows further (any of several).
        let text = render(&snaps, &orders, &[b"*-eu".to_vec(), b"nothing".to_vec()]);
        assert_eq!(
            queue_lines(&text),
            [r#"dq_messages{server="a:1",queue="orders-eu",state="ready"} 2"#]
        );
        // The cap keeps the first by name then server, and says what it
        // left out, per server.
        let capped = Selection {
            patterns: Vec::new(),
            max_queues: 2,
        };
        let text = render(&snaps, &capped, &[]);
        assert_eq!(
            queue_lines(&text),
            [
                r#"dq_messages{server="a:1",queue="emails",state="ready"} 1"#,
                r#"dq_messages{server="a:1",queue="orders",state="ready"} 3"#,
            ]
        );
        assert!(text.contains(r#"dq_metrics_queues_omitted{server="a:1"} 1"#));
        assert!(text.contains(r#"dq_metrics_queues_omitted{server="b:2"} 1"#));
        // 0: totals only.
        let none = Selection {
            patterns: Vec::new(),
            max_queues: 0,
        };
        let text = render(&snaps, &none, &[]);
        assert!(queue_lines(&text).is_empty());
        assert!(!text.contains("dq_added_total{"));
        assert!(text.contains(r#"dq_metrics_queues_omitted{server="a:1"} 3"#));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn flow_control_and_schedules_per_queue_and_per_server() {
        let mut a = server(
            "a:1",
            &[("orders", 3, 0), ("emails", 1, 0), ("plain", 0, 0)],
        );
        a.queues[0].1 = Stats {
            paused: true,
            paused_until: Some(1_795_621_457_079),
            rate: Some("5000/1h".into()),
            max_inflight: Some(20),
            throttled: 7,
            schedules: 2,
            ..a.queues[0].1.clone()
        };
        a.queues[1].1 = Stats {
            paused: true,
            rate: Some("100/1s".into()),
            throttled: 5,
            schedules: 1,
            ..a.queues[1].1.clone()
        };
        a.info = Some(dq_client::admin::parse_info_dq("dq_schedule_runs:12\r\n"));
        let text = render(&[a], &every(), &[]);
        for line in [
            r#"dq_paused{server="a:1",queue="orders"} 1"#,
            r#"dq_paused{server="a:1",queue="emails"} 1"#,
            r#"dq_paused{server="a:1",queue="plain"} 0"#,
            r#"dq_paused_until_timestamp_seconds{server="a:1",queue="orders"} 1795621457.079"#,
            r#"dq_rate_limit_deliveries{server="a:1",queue="orders"} 5000"#,
            r#"dq_rate_limit_window_seconds{server="a:1",queue="orders"} 3600.0"#,
            r#"dq_rate_limit_deliveries{server="a:1",queue="emails"} 100"#,
            r#"dq_rate_limit_window_seconds{server="a:1",queue="emails"} 1.0"#,
            r#"dq_max_inflight{server="a:1",queue="orders"} 20"#,
            r#"dq_schedules{server="a:1",queue="orders"} 2"#,
            r#"dq_schedules{server="a:1",queue="plain"} 0"#,
            r#"dq_throttled_total{server="a:1",queue="orders"} 7"#,
            r#"dq_throttled_total{server="a:1",queue="plain"} 0"#,
            r#"dq_server_queues_paused{server="a:1"} 2"#,
            r#"dq_server_throttled_total{server="a:1"} 12"#,
            r#"dq_server_schedules{server="a:1"} 3"#,
            r#"dq_schedule_runs_total{server="a:1"} 12"#,
            "# TYPE dq_paused gauge",
            "# TYPE dq_throttled counter",
            "# TYPE dq_server_throttled counter",
            "# TYPE dq_rate_limit_window_seconds gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        // A limit that is not there has no series, rather than a 0 that
        // reads as "nothing may be delivered".
        for absent in [
            r#"dq_paused_until_timestamp_seconds{server="a:1",queue="emails"}"#,
            r#"dq_max_inflight{server="a:1",queue="emails"}"#,
            r#"dq_rate_limit_deliveries{server="a:1",queue="plain"}"#,
            r#"dq_max_inflight{server="a:1",queue="plain"}"#,
        ] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
        // Each family once, whatever dq-client's counter list holds.
        assert_eq!(text.matches("# TYPE dq_throttled counter").count(), 1);
        assert_eq!(text.matches("# HELP dq_paused ").count(), 1);
    }

    #[test]
    fn a_server_not_read_has_no_totals() {
        let mut down = server("a:1", &[]);
        down.error = Some("connection refused".into());
        let text = render(&[down], &every(), &[]);
        assert!(text.contains(r#"dq_server_up{server="a:1"} 0"#));
        assert!(!text.contains("dq_server_messages{"));
    }
}
