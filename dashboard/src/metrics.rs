//! `/metrics`: the queues' DQ.STATS and the servers' INFO dq, read at each
//! scrape (so the values are the server's now, not a sample's), in the
//! OpenMetrics text format.

use std::sync::atomic::AtomicU64;

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

/// The metric name of a DQ.STATS counter: `lease-expired` → `dq_lease_expired`
/// (the text adds `_total`).
pub fn counter_name(field: &str) -> String {
    format!("dq_{}", field.replace('-', "_"))
}

pub fn render(snaps: &[ServerSnap]) -> String {
    let mut registry = Registry::default();
    let up = Family::<ServerLabels, Gauge>::default();
    let ticks = Family::<ServerLabels, Counter>::default();
    let continued = Family::<ServerLabels, Counter>::default();
    let lateness = Family::<ServerLabels, FGauge>::default();
    let longest = Family::<ServerLabels, FGauge>::default();
    let messages = Family::<StateLabels, Gauge>::default();
    let oldest = Family::<QueueLabels, FGauge>::default();
    let counters: Vec<(&'static str, Family<QueueLabels, Counter>)> = dq_client::Stats::default()
        .counters()
        .iter()
        .map(|(name, _)| (*name, Family::default()))
        .collect();

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
        }
        for (name, stats) in &snap.queues {
            let queue = String::from_utf8_lossy(name).into_owned();
            let q = QueueLabels {
                server: snap.addr.clone(),
                queue: queue.clone(),
            };
            for state in dq_client::State::ALL {
                messages
                    .get_or_create(&StateLabels {
                        server: snap.addr.clone(),
                        queue: queue.clone(),
                        state: state.as_str(),
                    })
                    .set(i64::try_from(stats.count(state)).unwrap_or(i64::MAX));
            }
            oldest
                .get_or_create(&q)
                .set(stats.oldest_ready_age_ms.unwrap_or(0) as f64 / 1000.0);
            for ((_, value), (_, family)) in stats.counters().iter().zip(&counters) {
                family.get_or_create(&q).inc_by(*value);
            }
        }
    }

    registry.register(
        "dq_server_up",
        "1 when the server answered INFO dq, DQ.QUEUES and every DQ.STATS of this scrape",
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
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use dq_client::{InfoDq, Stats};

    #[test]
    fn queues_and_servers_are_rendered() {
        let snaps = vec![ServerSnap {
            addr: "127.0.0.1:6379".into(),
            queues: vec![(
                b"orders\"x".to_vec(),
                Stats {
                    ready: 3,
                    dead: 1,
                    added: 10,
                    lease_expired: 2,
                    oldest_ready_age_ms: Some(1500),
                    ..Stats::default()
                },
            )],
            info: Some(dq_client::admin::parse_info_dq(
                "dq_timer_ticks:42\r\ndq_lateness_ms:250\r\n",
            )),
            error: None,
        }];
        let text = render(&snaps);
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
}
