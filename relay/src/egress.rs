//! Egress: the addresses the relay refuses to connect to.
//!
//! The allow-list is of names and URLs, but a name says nothing about
//! where it leads: `*.example.com` may answer 127.0.0.1, `vm` is loopback
//! in /etc/hosts, and a DNS server can answer one address when asked
//! and another a second later. So, as webhook senders that take URLs
//! from users do (Svix, QStash, Stripe's Smokescreen), the relay judges
//! the *address* it connects to: loopback, private, link-local (the
//! cloud metadata address), carrier-grade NAT, multicast and the other
//! ranges below are refused, whatever the allow-list says, unless the
//! operator opens one with `--allow-net CIDR`.
//!
//! An IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`,
//! compatible `::a.b.c.d`, translated `::ffff:0:a.b.c.d`, NAT64
//! `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`) is judged by the IPv4
//! address it carries: the kernel or a translator on the path turns
//! `::ffff:127.0.0.1` into 127.0.0.1.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;

/// IPv4 ranges refused, and what each is called in a refusal. The first
/// match names it, so a single address comes before the range holding it.
/// (docs/relay.md's table is this one.)
#[rustfmt::skip]
const REFUSED_V4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 32, "unspecified"),
    // Linux connects to 0.0.0.0 as to the local host.
    (Ipv4Addr::new(0, 0, 0, 0), 8, "in 0.0.0.0/8 (\"this network\")"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private"),
    // Also Alibaba Cloud's metadata address, 100.100.100.200.
    (Ipv4Addr::new(100, 64, 0, 0), 10, "carrier-grade NAT (100.64.0.0/10)"),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback"),
    (Ipv4Addr::new(169, 254, 169, 254), 32, "link-local (cloud metadata)"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link-local"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private"),
    // Also Oracle Cloud's metadata address, 192.0.0.192, and DS-Lite's
    // and NAT64 discovery's addresses: never a webhook receiver.
    (Ipv4Addr::new(192, 0, 0, 0), 24, "an IETF protocol assignment (192.0.0.0/24)"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "for benchmarking (198.18.0.0/15)"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast"),
    (Ipv4Addr::new(255, 255, 255, 255), 32, "broadcast"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved (240.0.0.0/4)"),
];

/// IPv6 ranges refused, once an address that carries an IPv4 one has been
/// judged by that instead.
#[rustfmt::skip]
const REFUSED_V6: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, "unspecified"),
    (Ipv6Addr::LOCALHOST, 128, "loopback"),
    // A translator of the site's own: what it reaches is the site's.
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48, "local-use NAT64 (64:ff9b:1::/48)"),
    // Also AWS's IPv6 metadata address, fd00:ec2::254.
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, "unique-local"),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "link-local"),
    // Deprecated (RFC 3879), but some networks still route it.
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, "site-local (fec0::/10)"),
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "multicast"),
];

fn v4_in(ip: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn v6_in(ip: Ipv6Addr, net: Ipv6Addr, len: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(net) & mask
}

/// The IPv4 address an IPv6 one carries, in the forms that reach it: the
/// socket layer (mapped), old stacks (compatible), SIIT (translated),
/// NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(ip);
    if ip.is_unspecified() || ip.is_loopback() {
        // :: and ::1 are themselves, not 0.0.0.0 and 0.0.0.1.
        return None;
    }
    let mapped = bits >> 32 == 0xffff;
    let compatible = bits >> 32 == 0;
    let translated = bits >> 32 == 0xffff_0000;
    let nat64 = v6_in(ip, Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96);
    let six_to_four = bits >> 112 == 0x2002;
    if mapped || compatible || translated || nat64 {
        Some(Ipv4Addr::from(bits as u32))
    } else if six_to_four {
        Some(Ipv4Addr::from((bits >> 80) as u32))
    } else {
        None
    }
}

/// Why `ip` is refused when no `--allow-net` opens it: the name of its
/// range, and the IPv4 address it was judged by if it carries one.
pub fn refused_range(ip: IpAddr) -> Option<(&'static str, Option<Ipv4Addr>)> {
    let v4_kind = |v4: Ipv4Addr| {
        REFUSED_V4
            .iter()
            .find(|(net, len, _)| v4_in(v4, *net, *len))
            .map(|(_, _, kind)| *kind)
    };
    match ip {
        IpAddr::V4(v4) => v4_kind(v4).map(|kind| (kind, None)),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => v4_kind(v4).map(|kind| (kind, Some(v4))),
            None => REFUSED_V6
                .iter()
                .find(|(net, len, _)| v6_in(v6, *net, *len))
                .map(|(_, _, kind)| (*kind, None)),
        },
    }
}

/// A range of addresses, `10.1.2.0/24` or `fd00:1::/64`; a bare address
/// is the range of that one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    len: u8,
}

impl Cidr {
    /// Parses `ADDRESS[/LENGTH]`. Host bits set after the length
    /// (`10.1.2.3/24`) are refused rather than cleared: they usually mean
    /// the operator had another range in mind.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let (addr, len) = match text.split_once('/') {
            Some((addr, len)) => (addr, Some(len)),
            None => (text, None),
        };
        // The standard library's parsers take dotted decimal without
        // leading zeros and IPv6 without a zone: no octal or hex IPv4
        // forms, no %eth0.
        let net: IpAddr = addr.parse().map_err(|_| {
            format!("{text}: not an address range (give one like 10.1.2.0/24 or fd00::/64)")
        })?;
        let width: u8 = if net.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => width,
            Some(digits) => {
                // u8's parser would also take "+24".
                let parsed = digits
                    .bytes()
                    .all(|b| b.is_ascii_digit())
                    .then(|| digits.parse::<u8>().ok())
                    .flatten();
                match parsed {
                    Some(len) if len <= width => len,
                    _ => {
                        return Err(format!(
                            "{text}: the prefix length must be a number from 0 to {width}"
                        ))
                    }
                }
            }
        };
        let cidr = Cidr { net, len };
        let first = cidr.first();
        if first != net {
            return Err(format!(
                "{text}: the address has bits set beyond /{len} (did you mean {}?)",
                Cidr { net: first, len }
            ));
        }
        Ok(cidr)
    }

    /// The range's first address: its address with the host bits cleared.
    fn first(&self) -> IpAddr {
        match self.net {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => v4_in(ip, net, self.len),
            (IpAddr::V6(net), IpAddr::V6(ip)) => v6_in(ip, net, self.len),
            _ => false,
        }
    }

    /// Whether this range holds every address of its family (`0.0.0.0/0`,
    /// `::/0`): worth a warning.
    pub fn is_everything(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
}

/// An address the relay will not connect to, and why. Its text is the
/// dead letter's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub addr: IpAddr,
    /// The name that resolved to it; none for an address in the URL.
    pub name: Option<String>,
    pub kind: &'static str,
    /// The IPv4 address it was judged by, if it carries one.
    pub embedded: Option<Ipv4Addr>,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "address {}", self.addr)?;
        if let Some(name) = &self.name {
            write!(f, " of {name}")?;
        }
        if let Some(v4) = self.embedded {
            // ::ffff:127.0.0.1 already shows it; 64:ff9b::7f00:1 does not.
            if !self.addr.to_string().ends_with(&v4.to_string()) {
                write!(f, " (IPv4 {v4})")?;
            }
        }
        write!(f, " is {} (see --allow-net)", self.kind)
    }
}

impl std::error::Error for Refused {}

/// The egress check: the refused ranges, less those the operator opened.
#[derive(Clone, Debug, Default)]
pub struct Egress {
    open: Vec<Cidr>,
}

impl Egress {
    pub fn new(open: Vec<Cidr>) -> Egress {
        Egress { open }
    }

    /// Whether the relay may connect to `ip`. An opened range holds an
    /// address if it holds the address itself or the IPv4 address it
    /// carries: `--allow-net 10.1.2.0/24` opens `::ffff:10.1.2.3` too.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let Some((kind, embedded)) = refused_range(ip) else {
            return Ok(());
        };
        let opened = self
            .open
            .iter()
            .any(|c| c.contains(ip) || embedded.is_some_and(|v4| c.contains(IpAddr::V4(v4))));
        if opened {
            return Ok(());
        }
        Err(Refused {
            addr: ip,
            name: None,
            kind,
            embedded,
        })
    }

    /// The check of a URL whose host is an address: the HTTP connector
    /// connects to such a host without asking the resolver, so it is
    /// checked here, before the call. The host is read as the connector
    /// reads it (hyper-util's `SocketAddrs::try_parse`: brackets trimmed,
    /// then an IPv4 or IPv6 address), so that what is an address to the
    /// connector is one here. A name passes here and is checked by the
    /// resolver (`resolver.rs`) on the addresses it finds.
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        let Some(host) = url.host_str() else {
            return Ok(());
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => self.check(ip),
            Err(_) => Ok(()),
        }
    }

    /// The addresses `name` resolved to, if every one may be connected to.
    /// One refused address refuses the name: a name that mixes public and
    /// internal answers is not one to call, and the reason then names the
    /// address to look at rather than failing now and then.
    pub fn check_resolved(
        &self,
        name: &str,
        addrs: Vec<SocketAddr>,
    ) -> Result<Vec<SocketAddr>, Refused> {
        for addr in &addrs {
            self.check(addr.ip()).map_err(|mut refused| {
                refused.name = Some(name.to_string());
                refused
            })?;
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(ip: &str) -> Option<&'static str> {
        refused_range(ip.parse().unwrap()).map(|(kind, _)| kind)
    }

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).unwrap()
    }

    /// Every refused range: its first and last address are refused with
    /// its name, and the addresses just outside it are not refused by it.
    #[test]
    fn every_refused_range_from_edge_to_edge() {
        let cases: &[(&str, &str, &str)] = &[
            ("0.0.0.0", "0.0.0.0", "unspecified"),
            (
                "0.0.0.1",
                "0.255.255.255",
                "in 0.0.0.0/8 (\"this network\")",
            ),
            ("10.0.0.0", "10.255.255.255", "private"),
            (
                "100.64.0.0",
                "100.127.255.255",
                "carrier-grade NAT (100.64.0.0/10)",
            ),
            ("127.0.0.0", "127.255.255.255", "loopback"),
            ("169.254.0.0", "169.254.255.255", "link-local"),
            (
                "169.254.169.254",
                "169.254.169.254",
                "link-local (cloud metadata)",
            ),
            ("172.16.0.0", "172.31.255.255", "private"),
            (
                "192.0.0.0",
                "192.0.0.255",
                "an IETF protocol assignment (192.0.0.0/24)",
            ),
            ("192.168.0.0", "192.168.255.255", "private"),
            (
                "198.18.0.0",
                "198.19.255.255",
                "for benchmarking (198.18.0.0/15)",
            ),
            ("224.0.0.0", "239.255.255.255", "multicast"),
            ("240.0.0.0", "255.255.255.254", "reserved (240.0.0.0/4)"),
            ("255.255.255.255", "255.255.255.255", "broadcast"),
            ("::", "::", "unspecified"),
            ("::1", "::1", "loopback"),
            (
                "64:ff9b:1::",
                "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
                "local-use NAT64 (64:ff9b:1::/48)",
            ),
            (
                "fc00::",
                "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                "unique-local",
            ),
            (
                "fe80::",
                "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                "link-local",
            ),
            (
                "fec0::",
                "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                "site-local (fec0::/10)",
            ),
            (
                "ff00::",
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                "multicast",
            ),
        ];
        for (first, last, name) in cases {
            assert_eq!(kind(first), Some(*name), "{first}");
            assert_eq!(kind(last), Some(*name), "{last}");
        }
        for public in [
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "191.255.255.255",
            "192.0.1.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "8.8.8.8",
            "93.184.215.14",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "64:ff9b:2::",
            "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fe00::",
            "::2:0:0",
        ] {
            assert_eq!(kind(public), None, "{public}");
        }
    }

    /// An IPv6 address carrying an IPv4 one is judged by the IPv4 one,
    /// in every form: mapped, compatible, translated, NAT64 and 6to4.
    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_unwrapped() {
        let v4_cases = [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "in 0.0.0.0/8 (\"this network\")"),
            ("10.1.2.3", "private"),
            ("100.100.100.200", "carrier-grade NAT (100.64.0.0/10)"),
            ("127.0.0.1", "loopback"),
            ("169.254.1.1", "link-local"),
            ("169.254.169.254", "link-local (cloud metadata)"),
            ("172.20.0.1", "private"),
            ("192.0.0.192", "an IETF protocol assignment (192.0.0.0/24)"),
            ("192.168.1.1", "private"),
            ("198.18.0.1", "for benchmarking (198.18.0.0/15)"),
            ("224.0.0.1", "multicast"),
            ("250.0.0.1", "reserved (240.0.0.0/4)"),
            ("255.255.255.255", "broadcast"),
        ];
        for (v4, name) in v4_cases {
            let ip: Ipv4Addr = v4.parse().unwrap();
            let bits = u32::from(ip);
            let (hi, lo) = ((bits >> 16) as u16, bits as u16);
            let forms = [
                format!("::ffff:{v4}"),
                format!("::ffff:0:{v4}"),
                format!("64:ff9b::{v4}"),
                format!("2002:{hi:x}:{lo:x}::1"),
            ];
            for form in forms {
                let v6: Ipv6Addr = form.parse().unwrap();
                assert_eq!(embedded_v4(v6), Some(ip), "{form}");
                assert_eq!(
                    refused_range(IpAddr::V6(v6)),
                    Some((name, Some(ip))),
                    "{form}"
                );
            }
        }
        // Compatible ::a.b.c.d, but :: and ::1 are themselves.
        assert_eq!(kind("::10.0.0.1"), Some("private"));
        assert_eq!(kind("::127.0.0.1"), Some("loopback"));
        assert_eq!(embedded_v4(Ipv6Addr::LOCALHOST), None);
        assert_eq!(embedded_v4(Ipv6Addr::UNSPECIFIED), None);
        // A public IPv4 address is public in any form.
        for public in ["::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1"] {
            assert_eq!(kind(public), None, "{public}");
        }
    }

    #[test]
    fn cidr_parser() {
        assert_eq!(cidr("10.1.2.0/24").to_string(), "10.1.2.0/24");
        assert_eq!(cidr(" 127.0.0.0/8 ").to_string(), "127.0.0.0/8");
        assert_eq!(cidr("10.1.2.3").to_string(), "10.1.2.3/32");
        assert_eq!(cidr("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(cidr("fd00:1::/64").to_string(), "fd00:1::/64");
        assert_eq!(cidr("::1").to_string(), "::1/128");
        assert_eq!(cidr("::/0").to_string(), "::/0");
        assert!(cidr("::/0").is_everything() && !cidr("::1").is_everything());
        for bad in [
            "",
            "/8",
            "10.0.0.0/",
            "10.0.0.0/33",
            "10.0.0.0/+8",
            "10.0.0.0/-1",
            "10.0.0.0/8/8",
            "10.0.0.0/ 8",
            "fd00::/129",
            "10.0.0",
            "010.0.0.0/8",
            "0x7f.0.0.1",
            "2130706433",
            "fe80::1%eth0/128",
            "localhost/8",
            "10.0.0.0/08x",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad:?} parsed");
        }
        let e = Cidr::parse("10.1.2.3/24").unwrap_err();
        assert!(e.contains("did you mean 10.1.2.0/24?"), "{e}");
        let e = Cidr::parse("fd00::1/64").unwrap_err();
        assert!(e.contains("did you mean fd00::/64?"), "{e}");
    }

    #[test]
    fn cidr_contains() {
        let net = cidr("10.1.2.0/24");
        assert!(net.contains("10.1.2.0".parse().unwrap()));
        assert!(net.contains("10.1.2.255".parse().unwrap()));
        assert!(!net.contains("10.1.3.0".parse().unwrap()));
        assert!(!net.contains("10.1.1.255".parse().unwrap()));
        assert!(!net.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(cidr("0.0.0.0/0").contains("255.255.255.255".parse().unwrap()));
        assert!(!cidr("0.0.0.0/0").contains("::1".parse().unwrap()));
        let v6 = cidr("fd00:1::/64");
        assert!(v6.contains("fd00:1::ffff:1".parse().unwrap()));
        assert!(!v6.contains("fd00:2::1".parse().unwrap()));
        assert!(cidr("::1").contains("::1".parse().unwrap()));
        assert!(!cidr("::1").contains("::2".parse().unwrap()));
    }

    #[test]
    fn allow_net_opens_one_range_and_no_more() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let closed = Egress::default();
        assert!(closed.check(ip("8.8.8.8")).is_ok());
        assert!(closed.check(ip("10.1.2.3")).is_err());

        let egress = Egress::new(vec![cidr("10.1.2.0/24"), cidr("fd00:1::/64")]);
        assert!(egress.check(ip("10.1.2.3")).is_ok());
        // The IPv6 forms of an opened IPv4 address are opened with it.
        assert!(egress.check(ip("::ffff:10.1.2.3")).is_ok());
        assert!(egress.check(ip("64:ff9b::10.1.2.3")).is_ok());
        assert!(egress.check(ip("fd00:1::5")).is_ok());
        for still in [
            "10.1.3.1",
            "127.0.0.1",
            "::1",
            "::ffff:127.0.0.1",
            "fd00:2::1",
        ] {
            assert!(egress.check(ip(still)).is_err(), "{still}");
        }
        let loopback = Egress::new(vec![cidr("127.0.0.0/8")]);
        assert!(loopback.check(ip("127.0.0.1")).is_ok());
        assert!(loopback.check(ip("::ffff:127.0.0.1")).is_ok());
        // ::1 is IPv6's own loopback, not an IPv4 address.
        assert!(loopback.check(ip("::1")).is_err());
    }

    #[test]
    fn reasons_say_which_address_and_why() {
        let e = Egress::default();
        let reason = |s: &str| e.check(s.parse().unwrap()).unwrap_err().to_string();
        assert_eq!(
            reason("127.0.0.1"),
            "address 127.0.0.1 is loopback (see --allow-net)"
        );
        assert_eq!(
            reason("::ffff:127.0.0.1"),
            "address ::ffff:127.0.0.1 is loopback (see --allow-net)"
        );
        assert_eq!(
            reason("64:ff9b::a9fe:a9fe"),
            "address 64:ff9b::a9fe:a9fe (IPv4 169.254.169.254) is link-local (cloud metadata) \
             (see --allow-net)"
        );
        let addrs = vec![
            "93.184.215.14:80".parse().unwrap(),
            "10.0.0.7:80".parse().unwrap(),
        ];
        assert_eq!(
            e.check_resolved("hooks.example.com", addrs)
                .unwrap_err()
                .to_string(),
            "address 10.0.0.7 of hooks.example.com is private (see --allow-net)"
        );
    }

    #[test]
    fn a_name_passes_only_with_every_address_it_resolved_to() {
        let e = Egress::default();
        let public: Vec<SocketAddr> = vec![
            "93.184.215.14:0".parse().unwrap(),
            "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:0"
                .parse()
                .unwrap(),
        ];
        assert_eq!(e.check_resolved("a.test", public.clone()), Ok(public));
        let mixed = vec![
            "93.184.215.14:0".parse().unwrap(),
            "[::1]:0".parse().unwrap(),
        ];
        assert!(e.check_resolved("a.test", mixed).is_err());
    }

    #[test]
    fn urls_with_addresses_are_checked_and_names_left_to_the_resolver() {
        let e = Egress::default();
        let check = |u: &str| e.check_url(&Url::parse(u).unwrap());
        for refused in [
            "http://127.0.0.1:8080/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://169.254.169.254/latest/meta-data/",
            "https://[fd00:ec2::254]/",
        ] {
            assert!(check(refused).is_err(), "{refused}");
        }
        assert!(check("http://8.8.8.8/").is_ok());
        assert!(check("http://localhost/").is_ok());
        assert!(check("http://vm/").is_ok());
    }
}
