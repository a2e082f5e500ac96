//! Where the queues live: one server, or a Redis Cluster of them. Every
//! other part of the crate reaches Redis through [`Server`] and the
//! [`Connection`] it opens, so none of it cares which.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Pipeline,
    RedisFuture, Value,
};

use crate::error::Error;

/// A dq server, or the masters of a Redis Cluster running dq.
#[derive(Clone)]
pub enum Server {
    Single(Box<redis::Client>),
    /// The nodes given; the first also says how to reach any node (TLS,
    /// user, password), with its address replaced by the node's.
    Cluster {
        nodes: Vec<ConnectionInfo>,
    },
}

impl From<redis::Client> for Server {
    fn from(client: redis::Client) -> Server {
        Server::Single(Box::new(client))
    }
}

/// A node of a cluster, as `MOVED` names it.
pub(crate) type Node = (String, u16);

impl Server {
    /// One server: `redis://host:port/db` (or `rediss://`, `redis+unix://`).
    pub fn single(url: impl IntoConnectionInfo) -> Result<Server, Error> {
        Ok(Server::Single(Box::new(redis::Client::open(url)?)))
    }

    /// A Redis Cluster, reached first through any of `nodes`; commands go
    /// to the master that owns their queue's slot, following MOVED and ASK.
    pub fn cluster<T: IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
    ) -> Result<Server, Error> {
        let nodes = nodes
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<Result<Vec<_>, _>>()?;
        seed(&nodes)?;
        Ok(Server::Cluster { nodes })
    }

    /// A connection for non-blocking commands, shared by many tasks
    /// (multiplexed) and reconnecting by itself. A blocking command
    /// ([`Queue::wait`](crate::Queue::wait)) goes on a connection of its
    /// own, which it opens from this one.
    pub async fn connect(&self, timeout: Duration) -> Result<Connection, Error> {
        let link = match self {
            Server::Single(client) => Link::Single(
                ConnectionManager::new_with_config(
                    client.as_ref().clone(),
                    ConnectionManagerConfig::new()
                        .set_response_timeout(Some(timeout))
                        .set_connection_timeout(Some(timeout)),
                )
                .await?,
            ),
            Server::Cluster { nodes } => {
                let client = ClusterClientBuilder::new(nodes.clone())
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .build()?;
                Link::Cluster(client.get_async_connection().await?)
            }
        };
        Ok(Connection {
            link,
            blocking: Arc::new(Blocking {
                server: self.clone(),
                timeout,
                idle: Mutex::default(),
                homes: Mutex::default(),
            }),
        })
    }

    /// A connection of its own to one node, for a blocking POP (which would
    /// hold up every other command on a shared socket): the server itself,
    /// or in a cluster `node` (the seed until a MOVED says where to go).
    pub(crate) async fn dedicated(
        &self,
        node: Option<&Node>,
        config: &AsyncConnectionConfig,
    ) -> Result<MultiplexedConnection, Error> {
        let client = match (self, node) {
            (Server::Single(client), _) => client.as_ref().clone(),
            (Server::Cluster { nodes }, None) => redis::Client::open(seed(nodes)?.clone())?,
            (Server::Cluster { nodes }, Some((host, port))) => {
                redis::Client::open(node_info(seed(nodes)?, host, *port))?
            }
        };
        Ok(client
            .get_multiplexed_async_connection_with_config(config)
            .await?)
    }

    /// The host of `node`, else of the server (the seed of a cluster).
    pub(crate) fn host_of(&self, node: Option<&Node>) -> String {
        let addr = match (self, node) {
            (_, Some((host, _))) => return host.clone(),
            (Server::Single(client), None) => client.get_connection_info().addr(),
            (Server::Cluster { nodes }, None) => match nodes.first() {
                Some(seed) => seed.addr(),
                None => return String::new(),
            },
        };
        match addr {
            ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
            _ => String::new(),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Server::Cluster { .. })
    }
}

/// How to reach cluster node `host:port`: `template`'s settings (TLS,
/// user, password, database) with the address replaced.
pub fn node_info(template: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let addr = match template.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_owned(), port),
    };
    template.clone().set_addr(addr)
}

fn seed(nodes: &[ConnectionInfo]) -> Result<&ConnectionInfo, Error> {
    nodes
        .first()
        .ok_or_else(|| Error::Config("a cluster needs at least one node".into()))
}

/// A shared connection to a [`Server`]: clone it freely, every clone uses
/// the same sockets. Blocking commands (DQ.WAIT with a timeout) go on
/// connections of their own, which the clones share too: a few are kept
/// open between waits.
#[derive(Clone)]
pub struct Connection {
    link: Link,
    blocking: Arc<Blocking>,
}

#[derive(Clone)]
enum Link {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// The most connections kept open for blocking commands between them.
const IDLE_BLOCKING: usize = 16;

/// Where blocking commands go: a connection of their own (a blocked
/// command would hold up every other on a shared socket), to the server,
/// or in a cluster to the master of the queue's slot.
struct Blocking {
    server: Server,
    /// The connection's response timeout: a blocking command may take this
    /// long beyond its own time.
    timeout: Duration,
    /// Connections free for the next blocking command, with their node
    /// (`None`: the server itself, or a cluster's seed).
    idle: Mutex<Vec<(Option<Node>, MultiplexedConnection)>>,
    /// In a cluster: the master of each slot a MOVED has named.
    homes: Mutex<HashMap<u16, Node>>,
}

impl Blocking {
    /// Keeps `con` (to `node`) for the next blocking command, unless
    /// enough are kept already.
    fn keep(&self, node: Option<Node>, con: MultiplexedConnection) {
        let mut idle = lock(&self.idle);
        if idle.len() < IDLE_BLOCKING {
            idle.push((node, con));
        }
    }
}

/// A lock whose data stays whole even if a holder panicked: nothing here
/// panics while holding one.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    /// Runs `cmd` on one node: the server itself, or the cluster node `node`
    /// (for CLIENT UNBLOCK, which must reach the node holding the client).
    pub(crate) async fn on_node(&mut self, cmd: Cmd, node: Option<&Node>) -> Result<Value, Error> {
        if let (Link::Cluster(c), Some((host, port))) = (&mut self.link, node) {
            let route = SingleNodeRoutingInfo::ByAddress {
                host: host.clone(),
                port: *port,
            };
            return Ok(c.route_command(cmd, RoutingInfo::SingleNode(route)).await?);
        }
        Ok(cmd.query_async(self).await?)
    }

    /// Runs `command`, which blocks the server-side client for up to `block`
    /// (DQ.WAIT or DQ.EVENTS ... BLOCK), on a connection of its own, to the node that
    /// holds `queue`: MOVED and ASK are followed, as a cluster client
    /// follows them. The connection is kept for the next such command
    /// unless it failed; a future dropped while it waits closes it, which
    /// ends the wait on the server too.
    pub(crate) async fn blocking(
        &self,
        command: &'static str,
        queue: &[u8],
        cmd: &Cmd,
        block: Duration,
    ) -> Result<Value, Error> {
        let b = &self.blocking;
        let slot = crate::shard::hash_slot(queue);
        let mut node: Option<Node> = match b.server {
            Server::Cluster { .. } => lock(&b.homes).get(&slot).cloned(),
            Server::Single(_) => None,
        };
        let mut asking = false;
        for _ in 0..16 {
            let idle = {
                let mut idle = lock(&b.idle);
                let at = idle.iter().position(|(n, _)| *n == node);
                at.map(|i| idle.swap_remove(i).1)
            };
            let reused = idle.is_some();
            let mut con = match idle {
                Some(con) => con,
                None => {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(b.timeout))
                        .set_response_timeout(Some(block.saturating_add(b.timeout)));
                    match b.server.dedicated(node.as_ref(), &config).await {
                        Ok(con) => con,
                        Err(e) => {
                            // The node a MOVED named may be gone (a
                            // failover): the next try starts at the seed.
                            lock(&b.homes).remove(&slot);
                            return Err(e);
                        }
                    }
                }
            };
            con.set_response_timeout(block.saturating_add(b.timeout));
            if asking {
                // The slot is moving and the key is at its new master
                // already: ASKING lets the next command in.
                redis::cmd("ASKING").query_async::<()>(&mut con).await?;
            }
            let reply = match con.req_packed_command(cmd).await {
                // A server's refusal may come back as a value.
                Ok(Value::ServerError(e)) => Err(redis::RedisError::from(e)),
                reply => reply,
            };
            let e = match reply {
                Ok(reply) => {
                    b.keep(node, con);
                    return Ok(reply);
                }
                Err(e) => e,
            };
            let broken = e.is_io_error() || e.is_connection_dropped() || e.is_timeout();
            let to = e
                .redirect_node()
                .and_then(|(addr, _)| addr.rsplit_once(':'))
                .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)));
            let Some((host, port)) = to else {
                if broken && reused && !e.is_timeout() {
                    // A kept connection the server closed while it was
                    // idle: once more on a new one.
                    continue;
                }
                if !broken {
                    b.keep(node, con);
                }
                return Err(Error::from(e));
            };
            // An empty host means the one this connection went to.
            let host = match host {
                "" => b.server.host_of(node.as_ref()),
                host => host.trim_matches(['[', ']']).to_owned(),
            };
            b.keep(node, con);
            asking = e.code() == Some("ASK");
            if !asking {
                lock(&b.homes).insert(slot, (host.clone(), port));
            }
            node = Some((host, port));
        }
        Err(Error::Reply {
            command,
            detail: format!(
                "redirected 16 times for queue '{}': the cluster is changing; try again",
                String::from_utf8_lossy(queue)
            ),
        })
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.link {
            Link::Single(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.link {
            Link::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Single(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}
