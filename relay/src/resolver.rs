//! The HTTP client's resolver: the one place a receiver's name becomes
//! the addresses the relay connects to.
//!
//! It looks the name up once, checks every address it got (`egress.rs`)
//! and hands the HTTP connector exactly those addresses, or an error. The
//! connector connects only to what the resolver returned, so the address
//! checked is the address connected to: a DNS server that answers a
//! public address to a first lookup and 127.0.0.1 to a second (DNS
//! rebinding) gets no second lookup to answer. A URL whose host is an
//! address never reaches a resolver; the relay checks it before the call
//! (`Egress::check_url`).

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::egress::Egress;

pub struct CheckedResolver {
    egress: Arc<Egress>,
}

impl CheckedResolver {
    pub fn new(egress: Arc<Egress>) -> CheckedResolver {
        CheckedResolver { egress }
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let egress = Arc::clone(&self.egress);
        let name = name.as_str().to_string();
        Box::pin(async move {
            // The system's resolver (getaddrinfo, through tokio's blocking
            // pool), as reqwest's default: /etc/hosts, nsswitch and all.
            // Port 0: the connector sets the URL's port on each address.
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if found.is_empty() {
                return Err(format!("{name} has no addresses").into());
            }
            let checked = egress.check_resolved(&name, found)?;
            Ok(Box::new(checked.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::{Cidr, Refused};

    async fn resolve(egress: Egress, name: &str) -> Result<Vec<SocketAddr>, String> {
        let resolver = CheckedResolver::new(Arc::new(egress));
        let name: Name = name.parse().map_err(|_| "not a name".to_string())?;
        match resolver.resolve(name).await {
            Ok(addrs) => Ok(addrs.collect()),
            Err(e) => Err(match e.downcast_ref::<Refused>() {
                Some(refused) => format!("refused: {refused}"),
                None => format!("other: {e}"),
            }),
        }
    }

    /// Names from this machine's /etc/hosts (docs/relay.md's tests rely on
    /// `vm` and `runsc` being 127.0.0.1 there): no query leaves it.
    #[tokio::test]
    async fn names_of_loopback_are_refused_unless_opened() {
        for name in ["localhost", "vm", "runsc"] {
            let got = resolve(Egress::default(), name).await;
            let Err(why) = got else {
                panic!("{name} resolved to {got:?}");
            };
            assert!(
                why.starts_with("refused: address ")
                    && why.ends_with(" is loopback (see --allow-net)"),
                "{name}: {why}"
            );
            assert!(why.contains(&format!(" of {name} ")), "{why}");
        }
        let open = Egress::new(vec![Cidr::parse("127.0.0.0/8").unwrap()]);
        let addrs = resolve(open, "vm").await.expect("vm, opened");
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
