//! Encryption at rest, as kube-apiserver's `--encryption-provider-config`: the
//! `apiserver.config.k8s.io/v1` `EncryptionConfiguration` file ([`EncryptionConfig`]) and
//! the backend that applies it between the store and the real backend
//! ([`EncryptingBackend`]), where kube puts its value transformers.
//!
//! For each resource the first matching `resources` entry applies: its first provider
//! (with its first key) writes, and every provider and key reads. Encrypted values carry
//! kube's prefix `k8s:enc:<provider>:v1:<key name>:` and then, as kube stores them, the
//! IV (aescbc, PKCS#7 padding), the nonce and sealed data with the storage key as
//! additional data (aesgcm), or the nonce and sealed box (secretbox). `identity` writes
//! plaintext and reads anything without a prefix.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockCipher, BlockDecryptMut, BlockEncryptMut, KeyInit as BlockKeyInit, KeyIvInit};
use aes_gcm::aead::generic_array::typenum::Unsigned;
use aes_gcm::aead::{Aead, AeadCore, KeyInit, Nonce, Payload};
use base64::Engine as _;
use bytes::Bytes;
use rand::RngCore;
use serde::Deserialize;

use super::{Backend, Event, LoadedState, ResourceId, StorageError, UnreadableObject, storage_key};

/// An `EncryptionConfiguration` file that cannot be used, with kube's field path.
#[derive(Debug, thiserror::Error)]
pub enum EncryptionConfigError {
    /// The file could not be read.
    #[error("reading the encryption provider config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not an `EncryptionConfiguration` this server can apply.
    #[error("invalid encryption provider config {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, e.g. `resources[0].providers[0].aescbc.keys[0].secret: ...`.
        message: String,
    },
}

/// The file as written (`apiserver.config.k8s.io/v1`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigFile {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<ResourcesFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourcesFile {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    aescbc: Option<KeysFile>,
    aesgcm: Option<KeysFile>,
    secretbox: Option<KeysFile>,
    identity: Option<serde::de::IgnoredAny>,
    kms: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    #[serde(default)]
    keys: Vec<KeyFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// A cipher an encrypting provider uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cipher {
    AesCbc,
    AesGcm,
    Secretbox,
}

impl Cipher {
    fn name(self) -> &'static str {
        match self {
            Cipher::AesCbc => "aescbc",
            Cipher::AesGcm => "aesgcm",
            Cipher::Secretbox => "secretbox",
        }
    }

    fn key_lengths(self) -> &'static [usize] {
        match self {
            Cipher::AesCbc | Cipher::AesGcm => &[16, 24, 32],
            Cipher::Secretbox => &[32],
        }
    }
}

/// One named key of an encrypting provider.
struct NamedKey {
    cipher: Cipher,
    name: String,
    secret: Vec<u8>,
}

impl NamedKey {
    fn prefix(&self) -> String {
        format!("k8s:enc:{}:v1:{}:", self.cipher.name(), self.name)
    }
}

/// A provider: plaintext, or one cipher with its keys (the first writes).
enum Provider {
    Identity,
    Keys(Vec<NamedKey>),
}

/// Which resources a `resources` entry names: `secrets` (core), `deployments.apps`,
/// `*.apps` (a whole group), `*.` (the core group) or `*.*` (everything).
#[derive(Debug, PartialEq, Eq)]
enum ResourcePattern {
    One { group: String, resource: String },
    Group(String),
    All,
}

impl ResourcePattern {
    fn parse(s: &str) -> Result<ResourcePattern, String> {
        if s == "*.*" {
            return Ok(ResourcePattern::All);
        }
        let (resource, group) = s.split_once('.').unwrap_or((s, ""));
        let valid =
            |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if resource == "*" && s.contains('.') {
            if group.split('.').all(valid) || group.is_empty() {
                return Ok(ResourcePattern::Group(group.to_string()));
            }
        } else if valid(resource) && (group.is_empty() || group.split('.').all(valid)) {
            return Ok(ResourcePattern::One { group: group.to_string(), resource: resource.to_string() });
        }
        Err(format!("Invalid value: \"{s}\": resource name should be of the form 'resource.group', '*.group' or '*.*'"))
    }

    fn matches(&self, group: &str, resource: &str) -> bool {
        match self {
            ResourcePattern::All => true,
            ResourcePattern::Group(g) => g == group,
            ResourcePattern::One { group: g, resource: r } => g == group && r == resource,
        }
    }
}

struct Rule {
    patterns: Vec<ResourcePattern>,
    providers: Vec<Provider>,
}

/// A parsed, validated `EncryptionConfiguration`.
pub(crate) struct EncryptionConfig {
    rules: Vec<Rule>,
}

impl std::fmt::Debug for EncryptionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys.
        f.debug_struct("EncryptionConfig").field("rules", &self.rules.len()).finish_non_exhaustive()
    }
}

/// Why a stored value could not be decrypted.
const NO_MATCHING_PREFIX: &str = "no matching prefix found";

impl EncryptionConfig {
    /// Reads and validates the file at `path`.
    pub(crate) fn load(path: &Path) -> Result<EncryptionConfig, EncryptionConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| EncryptionConfigError::Read { path: path.to_path_buf(), source })?;
        EncryptionConfig::parse(&text)
            .map_err(|message| EncryptionConfigError::Invalid { path: path.to_path_buf(), message })
    }

    /// Parses and validates the YAML (or JSON) text of a configuration.
    pub(crate) fn parse(text: &str) -> Result<EncryptionConfig, String> {
        let file: ConfigFile = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        if file.kind != "EncryptionConfiguration" || file.api_version != "apiserver.config.k8s.io/v1" {
            return Err(format!(
                "got unexpected config type: {}, Kind={} (want apiserver.config.k8s.io/v1, Kind=EncryptionConfiguration)",
                file.api_version, file.kind
            ));
        }
        if file.resources.is_empty() {
            return Err("resources: Required value: resources cannot be empty".into());
        }
        let mut rules = Vec::new();
        for (i, entry) in file.resources.into_iter().enumerate() {
            let at = format!("resources[{i}]");
            if entry.resources.is_empty() {
                return Err(format!("{at}.resources: Required value: at least one resource must be specified"));
            }
            if entry.providers.is_empty() {
                return Err(format!("{at}.providers: Required value: at least one provider must be specified"));
            }
            let patterns = entry
                .resources
                .iter()
                .enumerate()
                .map(|(j, r)| ResourcePattern::parse(r).map_err(|m| format!("{at}.resources[{j}]: {m}")))
                .collect::<Result<Vec<_>, _>>()?;
            let providers = entry
                .providers
                .into_iter()
                .enumerate()
                .map(|(j, p)| provider(p, &format!("{at}.providers[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            rules.push(Rule { patterns, providers });
        }
        Ok(EncryptionConfig { rules })
    }

    /// The providers for `resource`, if the configuration names it.
    fn providers(&self, resource: &ResourceId) -> Option<&[Provider]> {
        let (group, name) = resource.as_str().split_once('/')?;
        self.rules.iter().find(|r| r.patterns.iter().any(|p| p.matches(group, name))).map(|r| r.providers.as_slice())
    }

    /// The value to store for `plain`, written as `resource` at `key`.
    fn encrypt(&self, resource: &ResourceId, key: &str, plain: &Bytes) -> Result<Bytes, String> {
        let Some(Provider::Keys(keys)) = self.providers(resource).and_then(<[Provider]>::first) else {
            return Ok(plain.clone());
        };
        let Some(k) = keys.first() else {
            return Ok(plain.clone());
        };
        let mut out = k.prefix().into_bytes();
        let sealed = match k.cipher {
            Cipher::AesCbc => {
                let iv = random::<16>();
                out.extend_from_slice(&iv);
                cbc_seal(&k.secret, &iv, plain)?
            }
            Cipher::AesGcm => {
                let nonce = random::<12>();
                out.extend_from_slice(&nonce);
                match k.secret.len() {
                    16 => aead_seal::<aes_gcm::Aes128Gcm>(&k.secret, &nonce, plain, key.as_bytes())?,
                    24 => aead_seal::<Aes192Gcm>(&k.secret, &nonce, plain, key.as_bytes())?,
                    _ => aead_seal::<aes_gcm::Aes256Gcm>(&k.secret, &nonce, plain, key.as_bytes())?,
                }
            }
            Cipher::Secretbox => {
                let nonce = random::<24>();
                out.extend_from_slice(&nonce);
                aead_seal::<crypto_secretbox::XSalsa20Poly1305>(&k.secret, &nonce, plain, b"")?
            }
        };
        out.extend_from_slice(&sealed);
        Ok(Bytes::from(out))
    }

    /// The plaintext of `stored`, kept as `resource` at `key`.
    fn decrypt(&self, resource: &ResourceId, key: &str, stored: &Bytes) -> Result<Bytes, String> {
        let Some(providers) = self.providers(resource) else {
            return Ok(stored.clone());
        };
        for p in providers {
            match p {
                Provider::Identity => {
                    if !stored.starts_with(b"k8s:enc:") {
                        return Ok(stored.clone());
                    }
                }
                Provider::Keys(keys) => {
                    for k in keys {
                        let prefix = k.prefix();
                        if let Some(data) = stored.strip_prefix(prefix.as_bytes()) {
                            return open(k, key, data).map(Bytes::from);
                        }
                    }
                }
            }
        }
        Err(NO_MATCHING_PREFIX.into())
    }
}

type Aes192Gcm = aes_gcm::AesGcm<aes::Aes192, aes_gcm::aead::consts::U12>;

fn provider(p: ProviderFile, at: &str) -> Result<Provider, String> {
    let mut set = Vec::new();
    if let Some(k) = p.aescbc {
        set.push((Cipher::AesCbc, Some(k)));
    }
    if let Some(k) = p.aesgcm {
        set.push((Cipher::AesGcm, Some(k)));
    }
    if let Some(k) = p.secretbox {
        set.push((Cipher::Secretbox, Some(k)));
    }
    let identity = p.identity.is_some();
    if p.kms.is_some() {
        return Err(format!("{at}.kms: Unsupported value: kms providers are not supported by this server"));
    }
    match (set.len(), identity) {
        (0, false) => Err(format!(
            "{at}: Required value: provider does not contain any of the expected providers: aescbc, aesgcm, secretbox, identity"
        )),
        (0, true) => Ok(Provider::Identity),
        (1, false) => {
            let Some((cipher, Some(keys))) = set.pop() else {
                return Err(format!("{at}: Required value: a provider must be specified"));
            };
            named_keys(cipher, keys, &format!("{at}.{}", cipher.name())).map(Provider::Keys)
        }
        _ => Err(format!(
            "{at}: Invalid value: more than one provider specified in a single element, should split into different list elements"
        )),
    }
}

fn named_keys(cipher: Cipher, file: KeysFile, at: &str) -> Result<Vec<NamedKey>, String> {
    if file.keys.is_empty() {
        return Err(format!("{at}.keys: Required value: keys list cannot be empty"));
    }
    let mut keys: Vec<NamedKey> = Vec::new();
    for (i, k) in file.keys.into_iter().enumerate() {
        let at = format!("{at}.keys[{i}]");
        if k.name.is_empty() {
            return Err(format!("{at}.name: Required value: key's name cannot be empty"));
        }
        if k.name.contains(':') {
            return Err(format!("{at}.name: Invalid value: \"{}\": should not contain ':'", k.name));
        }
        if keys.iter().any(|o| o.name == k.name) {
            return Err(format!("{at}.name: Duplicate value: \"{}\"", k.name));
        }
        if k.secret.is_empty() {
            return Err(format!("{at}.secret: Required value: secret for the key cannot be empty"));
        }
        let Ok(secret) = base64::engine::general_purpose::STANDARD.decode(k.secret.trim()) else {
            return Err(format!("{at}.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded"));
        };
        if !cipher.key_lengths().contains(&secret.len()) {
            return Err(format!(
                "{at}.secret: Invalid value: \"REDACTED\": secret is not of the expected length, got {}, expected one of [{}]",
                secret.len(),
                cipher.key_lengths().iter().map(usize::to_string).collect::<Vec<_>>().join(" ")
            ));
        }
        keys.push(NamedKey { cipher, name: k.name, secret });
    }
    Ok(keys)
}

fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    rand::rng().fill_bytes(&mut b);
    b
}

fn open(k: &NamedKey, key: &str, data: &[u8]) -> Result<Vec<u8>, String> {
    match k.cipher {
        Cipher::AesCbc => {
            let (iv, sealed) = split(data, 16)?;
            cbc_open(&k.secret, iv, sealed)
        }
        Cipher::AesGcm => {
            let (nonce, sealed) = split(data, 12)?;
            match k.secret.len() {
                16 => aead_open::<aes_gcm::Aes128Gcm>(&k.secret, nonce, sealed, key.as_bytes()),
                24 => aead_open::<Aes192Gcm>(&k.secret, nonce, sealed, key.as_bytes()),
                _ => aead_open::<aes_gcm::Aes256Gcm>(&k.secret, nonce, sealed, key.as_bytes()),
            }
        }
        Cipher::Secretbox => {
            let (nonce, sealed) = split(data, 24)?;
            aead_open::<crypto_secretbox::XSalsa20Poly1305>(&k.secret, nonce, sealed, b"")
        }
    }
}

fn split(data: &[u8], at: usize) -> Result<(&[u8], &[u8]), String> {
    if data.len() < at {
        Err("the stored data was shorter than the required size".into())
    } else {
        Ok(data.split_at(at))
    }
}

fn aead_seal<A: Aead + KeyInit>(secret: &[u8], nonce: &[u8], msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, String> {
    if nonce.len() != <A as AeadCore>::NonceSize::USIZE {
        return Err("invalid nonce length".into());
    }
    let cipher = A::new_from_slice(secret).map_err(|e| e.to_string())?;
    cipher.encrypt(Nonce::<A>::from_slice(nonce), Payload { msg, aad }).map_err(|e| e.to_string())
}

fn aead_open<A: Aead + KeyInit>(secret: &[u8], nonce: &[u8], msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, String> {
    if nonce.len() != <A as AeadCore>::NonceSize::USIZE {
        return Err("invalid nonce length".into());
    }
    let cipher = A::new_from_slice(secret).map_err(|e| e.to_string())?;
    cipher
        .decrypt(Nonce::<A>::from_slice(nonce), Payload { msg, aad })
        .map_err(|_| "cipher: message authentication failed".to_string())
}

fn cbc_seal(secret: &[u8], iv: &[u8], plain: &[u8]) -> Result<Vec<u8>, String> {
    fn seal<C: BlockEncryptMut + BlockCipher + BlockKeyInit>(s: &[u8], iv: &[u8], p: &[u8]) -> Result<Vec<u8>, String> {
        let enc = cbc::Encryptor::<C>::new_from_slices(s, iv).map_err(|e| e.to_string())?;
        Ok(enc.encrypt_padded_vec_mut::<Pkcs7>(p))
    }
    match secret.len() {
        16 => seal::<aes::Aes128>(secret, iv, plain),
        24 => seal::<aes::Aes192>(secret, iv, plain),
        _ => seal::<aes::Aes256>(secret, iv, plain),
    }
}

fn cbc_open(secret: &[u8], iv: &[u8], sealed: &[u8]) -> Result<Vec<u8>, String> {
    fn open<C: BlockDecryptMut + BlockCipher + BlockKeyInit>(s: &[u8], iv: &[u8], d: &[u8]) -> Result<Vec<u8>, String> {
        let dec = cbc::Decryptor::<C>::new_from_slices(s, iv).map_err(|e| e.to_string())?;
        dec.decrypt_padded_vec_mut::<Pkcs7>(d).map_err(|_| "invalid PKCS#7 data (empty or not padded)".to_string())
    }
    if sealed.is_empty() || !sealed.len().is_multiple_of(16) {
        return Err("invalid ciphertext: not a multiple of the block size".into());
    }
    match secret.len() {
        16 => open::<aes::Aes128>(secret, iv, sealed),
        24 => open::<aes::Aes192>(secret, iv, sealed),
        _ => open::<aes::Aes256>(secret, iv, sealed),
    }
}

/// A [`Backend`] that encrypts values on their way to `inner` and decrypts them on the
/// way back, as configured. An object that cannot be decrypted is reported and loaded as
/// unreadable (reads of it fail with kube's "unable to transform key"); the server
/// serves everything else.
pub(crate) struct EncryptingBackend {
    inner: Box<dyn Backend>,
    config: EncryptionConfig,
}

impl EncryptingBackend {
    /// Wraps `inner` with `config`.
    pub(crate) fn new(inner: Box<dyn Backend>, config: EncryptionConfig) -> EncryptingBackend {
        EncryptingBackend { inner, config }
    }

    fn decrypt_event(&self, e: Event) -> Result<Event, String> {
        let key = storage_key(&e.resource, &e.key);
        let value = self.config.decrypt(&e.resource, &key, &e.value)?;
        let prev = e.prev.as_ref().map(|p| self.config.decrypt(&e.resource, &key, p)).transpose()?;
        Ok(Event { value, prev, ..e })
    }
}

impl Backend for EncryptingBackend {
    fn load(&self) -> Result<LoadedState, StorageError> {
        let loaded = self.inner.load()?;
        let mut objects = Vec::with_capacity(loaded.objects.len());
        let mut unreadable = loaded.unreadable;
        for mut o in loaded.objects {
            let resource = ResourceId(Arc::from(o.resource.as_str()));
            let key = storage_key(&resource, &(o.namespace.clone(), o.name.clone()));
            match self.config.decrypt(&resource, &key, &o.value) {
                Ok(v) => {
                    o.value = v;
                    objects.push(o);
                }
                Err(reason) => {
                    tracing::error!(key = %key, error = %reason, "stored object cannot be decrypted; not served");
                    unreadable.push(UnreadableObject {
                        resource: o.resource,
                        namespace: o.namespace,
                        name: o.name,
                        reason,
                    });
                }
            }
        }
        // The window of history stays gap-free: it starts after the newest event that
        // cannot be decrypted.
        let mut history = Vec::with_capacity(loaded.history.len());
        for e in loaded.history {
            match self.decrypt_event(e) {
                Ok(e) => history.push(e),
                Err(_) => history.clear(),
            }
        }
        Ok(LoadedState { rev: loaded.rev, objects, history, unreadable })
    }

    fn persist(&self, batch: &[Arc<Event>]) -> Result<(), StorageError> {
        let mut sealed = Vec::with_capacity(batch.len());
        for e in batch {
            if self.config.providers(&e.resource).is_none() {
                sealed.push(e.clone());
                continue;
            }
            let key = storage_key(&e.resource, &e.key);
            let seal = |v: &Bytes| {
                self.config
                    .encrypt(&e.resource, &key, v)
                    .map_err(|reason| StorageError::Backend(format!("unable to transform key \"{key}\": {reason}")))
            };
            let value = seal(&e.value)?;
            let prev = e.prev.as_ref().map(seal).transpose()?;
            sealed.push(Arc::new(Event { value, prev, ..Event::clone(e) }));
        }
        self.inner.persist(&sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY16: &str = "MTIzNDU2Nzg5MDEyMzQ1Ng=="; // 16 bytes
    const KEY32: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI="; // 32 bytes

    fn config(provider: &str, secret: &str) -> String {
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, '*.apps']\n  providers:\n  - {provider}:\n      keys:\n      - name: k1\n        secret: {secret}\n  - identity: {{}}\n"
        )
    }

    #[test]
    fn every_cipher_round_trips_with_kube_prefix_and_covers_the_named_resources() {
        let secrets = ResourceId::new("", "secrets");
        let plain = Bytes::from_static(b"{\"data\":{\"password\":\"aHVudGVyMg==\"}}");
        for (provider, secret) in
            [("aescbc", KEY32), ("aescbc", KEY16), ("aesgcm", KEY16), ("aesgcm", KEY32), ("secretbox", KEY32)]
        {
            let c = EncryptionConfig::parse(&config(provider, secret)).expect("valid");
            let stored = c.encrypt(&secrets, "/registry/secrets/default/s", &plain).expect("encrypt");
            assert!(stored.starts_with(format!("k8s:enc:{provider}:v1:k1:").as_bytes()), "{provider}");
            assert!(!stored.windows(10).any(|w| w == b"aHVudGVyMg"), "{provider} hides the plaintext");
            assert_eq!(c.decrypt(&secrets, "/registry/secrets/default/s", &stored).expect("decrypt"), plain);
            // Plaintext still reads (identity is listed).
            assert_eq!(c.decrypt(&secrets, "/registry/secrets/default/s", &plain).expect("identity"), plain);
        }
        let c = EncryptionConfig::parse(&config("aesgcm", KEY32)).expect("valid");
        let stored = c.encrypt(&secrets, "/registry/secrets/default/s", &plain).expect("encrypt");
        assert!(c.decrypt(&secrets, "/registry/secrets/default/other", &stored).is_err(), "aesgcm binds the key");
        let deployments = ResourceId::new("apps", "deployments");
        assert_ne!(c.encrypt(&deployments, "k", &plain).expect("encrypt"), plain, "*.apps is covered");
        let configmaps = ResourceId::new("", "configmaps");
        assert_eq!(c.encrypt(&configmaps, "k", &plain).expect("untouched"), plain, "configmaps are not named");
    }

    #[test]
    fn bad_files_name_the_field_as_kube_does() {
        let cases = [
            (config("aescbc", "c2hvcnQ="), "resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5"),
            (config("secretbox", KEY16), "resources[0].providers[0].secretbox.keys[0].secret: Invalid value"),
            (config("aesgcm", "not base64!"), "secrets must be base64 encoded"),
            ("apiVersion: v1\nkind: ConfigMap\n".to_string(), "got unexpected config type"),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers: []\n".to_string(),
                "resources[0].providers: Required value",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - kms: {name: x}\n".to_string(),
                "resources[0].providers[0].kms: Unsupported value",
            ),
        ];
        for pattern in ["*", "Secrets", "*.*.", ""] {
            assert!(ResourcePattern::parse(pattern).is_err(), "{pattern:?} is not a resource pattern");
        }
        assert_eq!(ResourcePattern::parse("*."), Ok(ResourcePattern::Group(String::new())), "the core group");
        for (text, want) in cases {
            let err = EncryptionConfig::parse(&text).err().unwrap_or_default();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }
}
