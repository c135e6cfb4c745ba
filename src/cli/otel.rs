//! OpenTelemetry export: with `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, dsh's own spans (each turn, step and call, the call
//! as an `execute_tool` span with the GenAI attributes, and each stage inside it) are exported
//! over OTLP/HTTP with protobuf, in batches, under the service name `dsh` (or
//! `OTEL_SERVICE_NAME`). Unset, nothing is installed and the spans stay disabled.
//!
//! Guarantees: the spans are flushed before the program exits normally ([`Otel::shutdown`]); an
//! exporter that cannot be built, or an export that fails, is a warning on stderr, never a
//! failed run; `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` is refused with a warning (only
//! `http/protobuf` is built in).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The exporter while the program runs.
pub struct Otel {
    provider: SdkTracerProvider,
}

impl Otel {
    /// Exports what is still buffered and stops the exporter.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            err_line!("dsh: exporting traces: {e}");
        }
    }
}

/// Whether the environment asks for an export.
fn wanted() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty()))
}

/// The layer that exports dsh's spans (its crates' targets, `debug` and above), when the
/// environment asks for it; `Err` is a warning to print.
pub fn layer<S>() -> Result<Option<(impl Layer<S>, Otel)>, String>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    if !wanted() {
        return Ok(None);
    }
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    if !protocol.is_empty() && protocol != "http/protobuf" {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported (only http/protobuf): no \
             traces are exported"
        ));
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| format!("no traces are exported: {e}"))?;
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "dsh".to_owned());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("dsh");
    let ours = tracing_subscriber::filter::filter_fn(|meta| {
        meta.target().starts_with("dsh") && *meta.level() <= tracing::Level::DEBUG
    });
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(ours);
    Ok(Some((layer, Otel { provider })))
}
