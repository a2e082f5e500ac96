//! Where the queues live: one server, or a Redis Cluster of them. Every
//! other part of the crate reaches Redis through [`Server`] and the
//! [`Connection`] it opens, so none of it cares which.

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
    /// (multiplexed) and reconnecting by itself.
    pub async fn connect(&self, timeout: Duration) -> Result<Connection, Error> {
        Ok(match self {
            Server::Single(client) => Connection::Single(
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
                Connection::Cluster(client.get_async_connection().await?)
            }
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
/// the same sockets.
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    /// Runs `cmd` on one node: the server itself, or the cluster node `node`
    /// (for CLIENT UNBLOCK, which must reach the node holding the client).
    pub(crate) async fn on_node(&mut self, cmd: Cmd, node: Option<&Node>) -> Result<Value, Error> {
        Ok(match (self, node) {
            (Connection::Cluster(c), Some((host, port))) => {
                let route = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                };
                c.route_command(cmd, RoutingInfo::SingleNode(route)).await?
            }
            (con, _) => cmd.query_async(con).await?,
        })
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}
