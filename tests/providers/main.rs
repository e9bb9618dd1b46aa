//! Provider adapters against real peers on loopback: the HTTP provider against a local test
//! server that answers each status class, hangs, or drops the connection.

mod http;
mod server;
