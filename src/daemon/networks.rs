//! Client networks (`daemon.allow_from = ["10.0.0.0/8", "fd00::/8"]`): the
//! peers a TCP listener serves, so Curio's tokenless client on another host
//! can be let in by address instead of by token.

use std::net::IpAddr;

/// One network: an address and how many leading bits of it must match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u32,
}

impl Network {
    /// `10.0.0.0/8`, `fd00::/8`, or one address (`192.168.1.7`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("daemon.allow_from: `{s}` {why}");
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| bad("is not an address or a network (10.0.0.0/8, fd00::/8)"))?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) => p
                .parse::<u32>()
                .ok()
                .filter(|&p| p <= bits)
                .ok_or_else(|| bad(&format!("has a prefix length that is not 0-{bits}")))?,
        };
        Ok(Self { addr, prefix })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 peer counts as
    /// its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let keep = |bits: u32, width: u32| -> u128 {
            if bits == 0 {
                0
            } else {
                (!0u128 << (width - bits)) & (!0u128 >> (128 - width))
            }
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = keep(self.prefix, 32);
                (u128::from(u32::from(n)) & mask) == (u128::from(u32::from(a)) & mask)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = keep(self.prefix, 128);
                (u128::from(n) & mask) == (u128::from(a) & mask)
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_parse_and_match() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let n = Network::parse("10.0.0.0/8").unwrap();
        assert!(n.contains(ip("10.200.3.4")));
        assert!(n.contains(ip("::ffff:10.1.1.1")), "IPv4-mapped");
        assert!(!n.contains(ip("11.0.0.1")));
        assert!(!n.contains(ip("fd00::1")));
        let one = Network::parse("192.168.1.7").unwrap();
        assert!(one.contains(ip("192.168.1.7")) && !one.contains(ip("192.168.1.8")));
        let all = Network::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("8.8.8.8")));
        let v6 = Network::parse("fd00::/8").unwrap();
        assert!(v6.contains(ip("fd12::3")) && !v6.contains(ip("fe80::1")));
        for bad in ["10.0.0.0/33", "10.0.0/8", "host", "fd00::/129", "1.2.3.4/x"] {
            let e = Network::parse(bad).unwrap_err();
            assert!(e.starts_with("daemon.allow_from: `"), "{e}");
        }
    }
}
