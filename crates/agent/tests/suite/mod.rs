mod cancel;
mod history;
mod hooks;
mod inbox;
mod order;
mod stream;
mod support;
mod turns;
