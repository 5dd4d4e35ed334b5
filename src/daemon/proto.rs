//! The `cuzk.v1` messages and service, generated from
//! `daemon/proto/cuzk/v1/proving.proto` by `build.rs`.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("cuzk.v1");
