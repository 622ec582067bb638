//! sockbench as its users run it, one module per concern, in one test binary (one link,
//! one run; ripgrep's layout). `common` holds what the modules share: the sandbox, the
//! server child, the JSON and schema helpers.

mod common;

mod agreement;
mod batch;
mod buffers;
mod cli;
mod compare;
mod connect;
mod counters;
mod data_port;
mod delay;
mod deploy;
mod documents;
mod engines;
mod exports;
mod floors;
mod html;
mod http_schema;
mod interrupt;
mod interrupt_steps;
mod intervals;
mod lab;
mod leftovers;
mod limits;
mod listen;
mod load;
mod loopback;
mod loss;
mod mesh;
mod mesh_html;
mod models;
mod openmetrics;
mod output;
mod peer_names;
mod pingpong;
mod placement;
mod rate;
mod readme;
mod relay;
mod report;
mod schema;
mod send;
mod serve;
mod server;
mod server_limits;
mod swarm;
mod syscalls;
mod tcp_info;
mod timestamps;
mod uring;
