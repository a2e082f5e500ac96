//! A Redis Cluster of servers with the module.

use std::process::Command;

use crate::{cli, cmd, int, run, text, wait_until, Server, ServerBuilder, Value, LONG};

/// Master nodes of a Redis Cluster on loopback ports, every slot assigned.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// `masters` nodes with the debug build of the module.
    pub fn start(masters: usize) -> Cluster {
        Cluster::start_with(masters, &Server::builder())
    }

    /// `masters` nodes started as `node` says (`Server::builder().release()`
    /// for a benchmark), joined with the cli's `--cluster create`.
    pub fn start_with(masters: usize, node: &ServerBuilder) -> Cluster {
        let nodes: Vec<Server> = (0..masters)
            .map(|_| {
                node.clone()
                    .args(&["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"])
                    .start()
            })
            .collect();
        let out = Command::new(cli())
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = Cluster { nodes };
        for node in &cluster.nodes {
            let mut c = node.conn();
            assert!(
                wait_until(LONG, || {
                    text(&cmd(&mut c, "CLUSTER INFO")).contains("cluster_state:ok")
                }),
                "the cluster did not come up"
            );
        }
        cluster
    }

    /// A cluster-aware client that follows MOVED and ASK and retries
    /// TRYAGAIN.
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        redis::cluster::ClusterClientBuilder::new(self.nodes.iter().map(|n| n.url()))
            .retries(30)
            .min_retry_wait(5)
            .max_retry_wait(200)
            .build()
            .and_then(|c| c.get_connection())
            .expect("cluster connection")
    }

    pub fn id(&self, node: usize) -> String {
        text(&cmd(&mut self.nodes[node].conn(), "CLUSTER MYID"))
    }

    /// The node that owns `key`'s slot.
    pub fn owner(&self, key: &[u8]) -> usize {
        let slot = int(&run(&mut self.nodes[0].conn(), &[b"CLUSTER", b"KEYSLOT", key]).unwrap());
        self.owner_of_slot(slot)
    }

    pub fn owner_of_slot(&self, slot: i64) -> usize {
        let counts: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                let mut c = self.nodes[i].conn();
                // Owned slots of this node, from its own CLUSTER NODES line.
                let nodes = text(&cmd(&mut c, "CLUSTER NODES"));
                let me = nodes.lines().find(|l| l.contains("myself")).unwrap_or("");
                me.split(' ').skip(8).any(|range| {
                    let mut ends = range.split('-').map(|s| s.parse::<i64>());
                    match (ends.next(), ends.next()) {
                        (Some(Ok(a)), Some(Ok(b))) => a <= slot && slot <= b,
                        (Some(Ok(a)), None) => a == slot,
                        _ => false,
                    }
                })
            })
            .collect();
        assert_eq!(counts.len(), 1, "slot {slot} has owners {counts:?}");
        counts[0]
    }
}

/// Runs a command on a cluster connection; a server error becomes `Err`.
pub fn cluster_run(
    con: &mut redis::cluster::ClusterConnection,
    args: &[&[u8]],
) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(con).map_err(|e| e.to_string())
}
