//! The server a daemon reads: a redis:// or rediss:// URL, with the ACL
//! user and password that may be given beside it (flags or environment
//! variables, which `ps` and shell histories show less than a URL).

use redis::{ConnectionInfo, IntoConnectionInfo, RedisResult};

/// `url` parsed, with `user` and `password` in place of any in the URL.
///
/// An error never holds the URL, which may carry a password: callers add
/// which flag was wrong, not its value.
pub fn connection_info(
    url: &str,
    user: Option<&str>,
    password: Option<&str>,
) -> RedisResult<ConnectionInfo> {
    let info = url.into_connection_info()?;
    let mut settings = info.redis_settings().clone();
    if let Some(user) = user {
        settings = settings.set_username(user);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    Ok(info.set_redis_settings(settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_password_given_beside_the_url_win() {
        let info = connection_info("redis://u:inurl@h:1/2", Some("ops"), Some("given")).unwrap();
        assert_eq!(info.addr().to_string(), "h:1");
        assert_eq!(info.redis_settings().username(), Some("ops"));
        assert_eq!(info.redis_settings().password(), Some("given"));
        assert_eq!(info.redis_settings().db(), 2);
        let info = connection_info("redis://u:inurl@h:1/", None, None).unwrap();
        assert_eq!(info.redis_settings().username(), Some("u"));
        assert_eq!(info.redis_settings().password(), Some("inurl"));
    }

    #[test]
    fn errors_never_show_the_password() {
        for url in [
            "http://u:hunter2@h/",
            "redis://u:hunter2@h/notanumber",
            "redis://u:hunter2@h:1/?protocol=9",
            "redis://u:hunter2@",
            "hunter2",
        ] {
            let err = connection_info(url, None, Some("hunter3")).unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("hunter"), "{url}: {shown}");
        }
    }
}
