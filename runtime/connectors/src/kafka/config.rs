//! `kind = "kafka"` in `[source]` and `[sink]`.

use super::security::{ClientSecurity, KafkaSasl, KafkaSecurity, KafkaTls};
use super::{schema_for, KafkaSettings, KafkaSink, KafkaSinkSettings, KafkaSource};
use super::{StartingOffsets, ValueFormat};
use crate::connector::{SinkConnector, SinkContext, SourceConnector, SourceContext};
use anyhow::{bail, Context, Result};
use arrow_schema::SchemaRef;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_core::json::MalformedPolicy;
use weir_core::schema::{self, ColumnConfig};
use weir_core::sink::Sink;

/// Kafka topics read in offset ranges the engine plans and records (the
/// runtime owns the offsets, not a consumer group).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceConfig {
    /// `host:port[,host:port…]`.
    pub bootstrap_servers: String,
    /// The topics read.
    pub topics: Vec<String>,
    /// Where a new query starts (default `"earliest"`).
    #[serde(default)]
    pub starting_offsets: StartingOffsets,
    /// Most offsets one epoch takes, over all partitions.
    #[serde(default)]
    pub max_offsets_per_trigger: Option<u64>,
    /// Fail when records aged out before they were read (default), or skip.
    #[serde(default = "yes")]
    pub fail_on_data_loss: bool,
    /// How values become columns (default `json`).
    #[serde(default)]
    pub value_format: ValueFormat,
    /// Columns of JSON or Avro values.
    #[serde(default)]
    pub schema: Vec<ColumnConfig>,
    /// The registry of the writer schemas (`value_format = "avro"`).
    #[serde(default)]
    pub schema_registry: Option<crate::avro::registry::RegistryConfig>,
    /// The values' message type and its descriptor set
    /// (`value_format = "protobuf"`).
    #[serde(default)]
    pub protobuf: Option<crate::protobuf::ProtobufConfig>,
    /// What a value that does not parse does (default: fail the epoch).
    #[serde(default)]
    pub on_malformed: MalformedPolicy,
    /// Directory for dead letters; default `<checkpoint>/dead-letter`.
    #[serde(default)]
    pub dead_letter: Option<PathBuf>,
    /// Also commit end offsets to this consumer group after each epoch,
    /// only so that standard lag tools can see progress.
    #[serde(default)]
    pub commit_to_group: Option<String>,
    /// TLS to the brokers (`[source.tls]`).
    #[serde(default)]
    pub tls: Option<KafkaTls>,
    /// SASL login to the brokers (`[source.sasl]`).
    #[serde(default)]
    pub sasl: Option<KafkaSasl>,
    /// Extra librdkafka settings, e.g. `{ "fetch.max.bytes" = "1048576" }`
    /// (no secrets: those go in `tls` and `sasl`).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// How long metadata and offset requests may take before failing.
    #[serde(default = "default_timeout", with = "weir_core::duration")]
    pub timeout: Duration,
}

fn yes() -> bool {
    true
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

impl KafkaSourceConfig {
    /// The Kafka settings in an erased `[source]`, if it is a Kafka source
    /// (what a cluster's workers need to join their group).
    pub fn of(settings: &dyn crate::connector::SourceSettings) -> Option<Self> {
        settings.as_any().downcast_ref::<Self>().cloned()
    }

    /// The `tls`, `sasl` and `options` keys, to check or resolve.
    pub fn security(&self) -> KafkaSecurity<'_> {
        KafkaSecurity {
            section: "source",
            tls: self.tls.as_ref(),
            sasl: self.sasl.as_ref(),
            options: &self.options,
        }
    }

    /// How to reach the brokers, with the pipeline's `options` and the
    /// [`security`](Self::security) resolved.
    pub fn brokers<'a>(&'a self, security: &'a ClientSecurity) -> super::client::Brokers<'a> {
        super::client::Brokers {
            servers: &self.bootstrap_servers,
            options: &self.options,
            timeout: self.timeout,
            security,
        }
    }
}

impl SourceConnector for KafkaSourceConfig {
    const KIND: &'static str = "kafka";
    type Source = KafkaSource;
    const PARTITIONED: bool = true;

    fn validate(&self) -> Result<()> {
        if self.bootstrap_servers.trim().is_empty() {
            bail!("`source.bootstrap_servers` must not be empty");
        }
        if self.topics.is_empty() || self.topics.iter().any(|t| t.trim().is_empty()) {
            bail!("`source.topics` must name at least one topic, none of them empty");
        }
        if self.max_offsets_per_trigger == Some(0) {
            bail!("`source.max_offsets_per_trigger` must be at least 1");
        }
        if self.timeout.is_zero() {
            bail!("`source.timeout` must be longer than zero");
        }
        self.security().validate()?;
        if self.schema_registry.is_some() && self.value_format != ValueFormat::Avro {
            bail!("`source.schema_registry` is for `value_format = \"avro\"`");
        }
        if self.protobuf.is_some() && self.value_format != ValueFormat::Protobuf {
            bail!("`source.protobuf` is for `value_format = \"protobuf\"`");
        }
        match self.value_format {
            ValueFormat::Avro => {
                let Some(registry) = &self.schema_registry else {
                    bail!(
                        "`value_format = \"avro\"` reads values in a schema registry's wire format: give \
                         `schema_registry = {{ url = \"…\" }}`"
                    );
                };
                registry.validate()?;
                schema::check(&self.schema)?;
                crate::avro::reader_schema(&schema::arrow_schema(&self.schema), "{}")
                    .map(|_| ())
                    .context("`source.schema`")
            }
            ValueFormat::Protobuf => {
                let Some(protobuf) = &self.protobuf else {
                    bail!(
                        "`value_format = \"protobuf\"` reads messages of one type: give `protobuf = \
                         {{ descriptor_set = \"payments.desc\", message = \"package.Message\" }}` (the \
                         descriptor set from `protoc --include_imports --descriptor_set_out=…`)"
                    );
                };
                if protobuf.message.trim().is_empty() {
                    bail!("`source.protobuf.message` must name the values' message type");
                }
                schema::check(&self.schema)
            }
            ValueFormat::Json => schema::check(&self.schema),
            ValueFormat::Raw if !self.schema.is_empty() => bail!(
                "`source.schema` is for `value_format = \"json\"`, `\"avro\"` or `\"protobuf\"`"
            ),
            ValueFormat::Raw => Ok(()),
        }
    }

    fn paths(&mut self) -> Vec<&mut PathBuf> {
        let mut paths: Vec<&mut PathBuf> = self.dead_letter.as_mut().into_iter().collect();
        paths.extend(self.protobuf.as_mut().map(|p| &mut p.descriptor_set));
        paths.extend(
            self.schema_registry
                .as_mut()
                .map(|r| r.paths_mut())
                .unwrap_or_default(),
        );
        paths.extend(security_paths(self.tls.as_mut(), self.sasl.as_mut()));
        paths
    }

    fn dead_letter(&self) -> Option<&Path> {
        self.dead_letter.as_deref()
    }

    fn columns(&self) -> &[ColumnConfig] {
        &self.schema
    }

    fn schema(&self) -> Result<SchemaRef> {
        schema_for(self.value_format, &schema::arrow_schema(&self.schema))
    }

    fn open(&self, ctx: &SourceContext<'_>) -> Result<KafkaSource> {
        // The message type first: a wrong file or name is said before any
        // broker is asked.
        let protobuf = self
            .protobuf
            .as_ref()
            .map(crate::protobuf::ProtobufDecoder::open)
            .transpose()
            .context("`source.protobuf`")?;
        KafkaSource::new(KafkaSettings {
            bootstrap_servers: self.bootstrap_servers.clone(),
            topics: self.topics.clone(),
            starting_offsets: self.starting_offsets.clone(),
            max_offsets_per_trigger: self.max_offsets_per_trigger,
            fail_on_data_loss: self.fail_on_data_loss,
            value_format: self.value_format,
            value_schema: schema::arrow_schema(&self.schema),
            commit_to_group: self.commit_to_group.clone(),
            options: self.options.clone(),
            security: self.security().resolve()?,
            timeout: self.timeout,
            batch_rows: ctx.batch_rows,
            policy: self.on_malformed,
            partition: ctx.partition,
            registry: self
                .schema_registry
                .clone()
                .map(|r| (r, ctx.checkpoint.to_path_buf())),
            protobuf,
        })
    }
}

/// How the Kafka sink writes each output row as a message value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkValueFormat {
    /// One JSON object per row.
    #[default]
    Json,
    /// Avro in a schema registry's wire format: the output's columns as an
    /// Avro record schema, registered under `subject` in `schema_registry`.
    Avro,
}

/// One message per output row to a Kafka topic: JSON, or Avro with a
/// schema registry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSinkConfig {
    /// `host:port[,host:port…]`.
    pub bootstrap_servers: String,
    /// The topic written.
    pub topic: String,
    /// Output column used as the message key.
    #[serde(default)]
    pub key_column: Option<String>,
    /// One transaction per epoch (exactly-once); needs a broker with
    /// KIP-98 transactions. Default: at-least-once with epoch headers.
    #[serde(default)]
    pub transactional: bool,
    /// TLS to the brokers (`[sink.tls]`).
    #[serde(default)]
    pub tls: Option<KafkaTls>,
    /// SASL login to the brokers (`[sink.sasl]`).
    #[serde(default)]
    pub sasl: Option<KafkaSasl>,
    /// Extra librdkafka settings (no secrets: those go in `tls` and `sasl`).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// How long metadata requests and deliveries may take.
    #[serde(default = "default_timeout", with = "weir_core::duration")]
    pub timeout: Duration,
    /// How rows become values (default `json`).
    #[serde(default)]
    pub value_format: SinkValueFormat,
    /// The registry the values' schema is registered in
    /// (`value_format = "avro"`).
    #[serde(default)]
    pub schema_registry: Option<crate::avro::registry::RegistryConfig>,
    /// The subject the schema is registered under (default
    /// `<topic>-value`, the registry's topic name strategy).
    #[serde(default)]
    pub subject: Option<String>,
    /// The Avro record's full name (default `weir.<topic>`).
    #[serde(default)]
    pub avro_record: Option<String>,
}

impl SinkConnector for KafkaSinkConfig {
    const KIND: &'static str = "kafka";

    fn validate(&self) -> Result<()> {
        self.security().validate()?;
        match (self.value_format, &self.schema_registry) {
            (SinkValueFormat::Avro, None) => bail!(
                "`sink.value_format = \"avro\"` registers the output's schema and frames each \
                 value with its id: give `schema_registry = {{ url = \"…\" }}`"
            ),
            (SinkValueFormat::Avro, Some(registry)) => registry.validate()?,
            (SinkValueFormat::Json, _) => {
                let avro_only = [
                    ("schema_registry", self.schema_registry.is_some()),
                    ("subject", self.subject.is_some()),
                    ("avro_record", self.avro_record.is_some()),
                ];
                if let Some((key, _)) = avro_only.iter().find(|(_, set)| *set) {
                    bail!("`sink.{key}` is for `value_format = \"avro\"`");
                }
            }
        }
        if self.subject.as_deref().is_some_and(|s| s.trim().is_empty()) {
            bail!("`sink.subject` must not be empty");
        }
        if let Some(record) = &self.avro_record {
            crate::avro::encode::check_record_name(record).context("`sink.avro_record`")?;
        }
        Ok(())
    }

    fn paths(&mut self) -> Vec<&mut PathBuf> {
        let mut paths = security_paths(self.tls.as_mut(), self.sasl.as_mut());
        paths.extend(
            self.schema_registry
                .as_mut()
                .map(|r| r.paths_mut())
                .unwrap_or_default(),
        );
        paths
    }

    fn identity(&self) -> Result<String> {
        Ok(format!("kafka:{}/{}", self.bootstrap_servers, self.topic))
    }

    fn open(&self, ctx: &SinkContext<'_>) -> Result<Box<dyn Sink>> {
        Ok(Box::new(KafkaSink::new(KafkaSinkSettings {
            bootstrap_servers: self.bootstrap_servers.clone(),
            topic: self.topic.clone(),
            key_column: self.key_column.clone(),
            transactional: self.transactional,
            options: self.options.clone(),
            security: self.security().resolve()?,
            timeout: self.timeout,
            query_id: ctx.query_id.to_string(),
            task: ctx.task,
            writer_id: ctx.writer_id(),
            avro: self.avro(ctx.checkpoint),
        })?))
    }
}

impl KafkaSinkConfig {
    /// What an Avro sink registers and where it records it.
    fn avro(&self, checkpoint: &Path) -> Option<super::sink::AvroValues> {
        if self.value_format != SinkValueFormat::Avro {
            return None;
        }
        // `validate` refused `value_format = "avro"` without a registry.
        let registry = self.schema_registry.clone()?;
        Some(super::sink::AvroValues {
            registry,
            checkpoint: checkpoint.to_path_buf(),
            subject: self
                .subject
                .clone()
                .unwrap_or_else(|| format!("{}-value", self.topic)),
            record: self
                .avro_record
                .clone()
                .unwrap_or_else(|| crate::avro::encode::default_record_name(&self.topic)),
        })
    }

    /// The `tls`, `sasl` and `options` keys, to check or resolve.
    pub fn security(&self) -> KafkaSecurity<'_> {
        KafkaSecurity {
            section: "sink",
            tls: self.tls.as_ref(),
            sasl: self.sasl.as_ref(),
            options: &self.options,
        }
    }
}

/// The files `tls` and `sasl` name, resolved against the pipeline file's
/// directory like every other path in it.
fn security_paths<'a>(
    tls: Option<&'a mut KafkaTls>,
    sasl: Option<&'a mut KafkaSasl>,
) -> Vec<&'a mut PathBuf> {
    let mut paths = Vec::new();
    if let Some(tls) = tls {
        paths.extend(tls.ca_file.as_mut());
        paths.extend(tls.cert_file.as_mut());
        paths.extend(tls.key_file.as_mut());
        paths.extend(tls.key_password.as_mut().and_then(|s| s.path_mut()));
    }
    if let Some(sasl) = sasl {
        paths.extend(sasl.password.path_mut());
    }
    paths
}
