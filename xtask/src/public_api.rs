//! `cargo xtask public-api [--check]`: a snapshot of each library crate's public API in
//! `api/<crate>.txt`, read from the source with `syn` (the stable toolchain has no rustdoc JSON).
//!
//! What counts: every `pub` item of a module reachable through `pub mod`s from `lib.rs`, every
//! item a reachable module re-exports with `pub use` (followed inside the crate, renames
//! honoured; a re-export of another crate is listed as such), the `pub` fields and variants of
//! those types, and the `pub` methods of their inherent impls and the trait impls they have.
//! `#[doc(hidden)]` items are left out. One sorted line per item, so a change is one line of a
//! review's diff. `--check` fails when a committed file differs from what the source says.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use quote::ToTokens;
use syn::{Item, UseTree, Visibility};

/// The crates whose API is kept, with their source directories.
pub const CRATES: &[(&str, &str)] = &[
    ("dsh-core", "crates/core"),
    ("dsh-process", "crates/process"),
    ("dsh-session", "crates/session"),
    ("dsh-guard", "crates/guard"),
    ("dsh-model", "crates/model"),
    ("dsh-scheduler", "crates/scheduler"),
    ("dsh-agent", "crates/agent"),
    ("dsh-mcp", "crates/mcp"),
    ("dsh-store-postgres", "crates/store-postgres"),
    ("dsh-tool-fs", "crates/tool-fs"),
    ("dsh-code-mode", "crates/code-mode"),
    ("dsh-hooks", "crates/hooks"),
    ("dsh-tool-bash", "crates/tool-bash"),
    ("dsh", "."),
];

/// One parsed module: its path in the crate, whether it is public, and its items.
struct Module {
    path: Vec<String>,
    public: bool,
    items: Vec<Item>,
}

pub fn cli(root: &Path, args: &[String]) -> Result<()> {
    let check = match args.first().map(String::as_str) {
        None => false,
        Some("--check") => true,
        Some(other) => bail!("unknown option `{other}` (public-api [--check])"),
    };
    let mut stale = Vec::new();
    for (name, dir) in CRATES {
        let text = snapshot(&root.join(dir).join("src/lib.rs"))
            .with_context(|| format!("reading the API of {name}"))?;
        let file = root.join("api").join(format!("{name}.txt"));
        let old = std::fs::read_to_string(&file).unwrap_or_default();
        if old != text {
            if check {
                stale.push(file.display().to_string());
            } else {
                std::fs::create_dir_all(root.join("api"))?;
                std::fs::write(&file, &text)?;
                eprintln!("wrote {}", file.display());
            }
        }
    }
    if !stale.is_empty() {
        bail!(
            "the public API changed; review it and run `cargo xtask public-api` to update:\n  {}",
            stale.join("\n  ")
        );
    }
    Ok(())
}

/// The snapshot text of the crate whose root is `lib`.
pub fn snapshot(lib: &Path) -> Result<String> {
    let mut modules = Vec::new();
    load(lib, Vec::new(), true, true, &mut modules)?;
    let mut lines = BTreeSet::new();
    // Inherent and trait impls by the type's last name, anywhere in the crate.
    let mut impls: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in &modules {
        for item in &m.items {
            if let Item::Impl(imp) = item
                && !hidden(&imp.attrs)
            {
                collect_impl(imp, &mut impls);
            }
        }
    }
    let by_path: BTreeMap<Vec<String>, &Module> =
        modules.iter().map(|m| (m.path.clone(), m)).collect();
    for m in modules.iter().filter(|m| m.public) {
        let prefix = join(&m.path);
        for item in &m.items {
            match item {
                Item::Use(u) if is_pub(&u.vis) && !hidden(&u.attrs) => {
                    let mut uses = Vec::new();
                    flatten(&u.tree, Vec::new(), &mut uses);
                    for (target, alias) in uses {
                        let shown = format!("{prefix}{alias}");
                        match resolve(&by_path, &m.path, &target) {
                            Some((module, item)) => {
                                emit(&shown, item, &impls, &mut lines);
                                let _ = module;
                            }
                            None => {
                                lines.insert(format!("pub use {shown} = {}", target.join("::")));
                            }
                        }
                    }
                }
                other => {
                    if let Some(name) = item_name(other)
                        && public_item(other)
                    {
                        emit(&format!("{prefix}{name}"), other, &impls, &mut lines);
                    }
                }
            }
        }
    }
    let mut out = String::new();
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    Ok(out)
}

fn join(path: &[String]) -> String {
    path.iter().map(|p| format!("{p}::")).collect()
}

fn is_pub(v: &Visibility) -> bool {
    matches!(v, Visibility::Public(_))
}

fn hidden(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("doc") && a.to_token_stream().to_string().contains("hidden")
            || a.path().is_ident("cfg") && a.to_token_stream().to_string().contains("test")
    })
}

fn load(
    file: &Path,
    path: Vec<String>,
    public: bool,
    is_root: bool,
    out: &mut Vec<Module>,
) -> Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let parsed = syn::parse_file(&text).with_context(|| format!("{}", file.display()))?;
    let dir: PathBuf = if is_root || file.file_name().is_some_and(|n| n == "mod.rs") {
        file.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        file.with_extension("")
    };
    inline(parsed.items, path, public, &dir, out)
}

fn inline(
    items: Vec<Item>,
    path: Vec<String>,
    public: bool,
    dir: &Path,
    out: &mut Vec<Module>,
) -> Result<()> {
    for item in &items {
        let Item::Mod(m) = item else { continue };
        if hidden(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        let mut sub = path.clone();
        sub.push(name.clone());
        let sub_public = public && is_pub(&m.vis);
        match &m.content {
            Some((_, inner)) => inline(inner.clone(), sub, sub_public, &dir.join(&name), out)?,
            None => {
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                let file = if flat.exists() { flat } else { nested };
                load(&file, sub, sub_public, false, out)?;
            }
        }
    }
    out.push(Module {
        path,
        public,
        items,
    });
    Ok(())
}

/// `pub use` trees as (target path, the name it is exported as).
fn flatten(tree: &UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten(&p.tree, next, out);
        }
        UseTree::Name(n) => {
            let mut t = prefix;
            t.push(n.ident.to_string());
            let alias = n.ident.to_string();
            out.push((t, alias));
        }
        UseTree::Rename(r) => {
            let mut t = prefix;
            t.push(r.ident.to_string());
            out.push((t, r.rename.to_string()));
        }
        UseTree::Glob(_) => {
            let mut t = prefix;
            t.push("*".to_owned());
            out.push((t, "*".to_owned()));
        }
        UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix.clone(), out);
            }
        }
    }
}

/// The item a path inside the crate names (relative to `from`), if it is one.
fn resolve<'a>(
    modules: &'a BTreeMap<Vec<String>, &'a Module>,
    from: &[String],
    target: &[String],
) -> Option<(&'a Module, &'a Item)> {
    let (mut base, rest): (Vec<String>, &[String]) = match target.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &target[1..]),
        Some("self") => (from.to_vec(), &target[1..]),
        Some("super") => (from[..from.len().saturating_sub(1)].to_vec(), &target[1..]),
        _ => (from.to_vec(), target),
    };
    let (name, dirs) = rest.split_last()?;
    base.extend(dirs.iter().cloned());
    let module = modules.get(&base)?;
    let item = module
        .items
        .iter()
        .find(|i| item_name(i).as_deref() == Some(name.as_str()) && !matches!(i, Item::Use(_)))?;
    Some((module, item))
}

fn item_name(item: &Item) -> Option<String> {
    Some(match item {
        Item::Fn(f) => f.sig.ident.to_string(),
        Item::Struct(s) => s.ident.to_string(),
        Item::Enum(e) => e.ident.to_string(),
        Item::Trait(t) => t.ident.to_string(),
        Item::Type(t) => t.ident.to_string(),
        Item::Const(c) => c.ident.to_string(),
        Item::Static(s) => s.ident.to_string(),
        Item::Mod(m) => m.ident.to_string(),
        Item::Macro(m) => m.ident.as_ref()?.to_string(),
        _ => return None,
    })
}

fn public_item(item: &Item) -> bool {
    let (vis, attrs) = match item {
        Item::Fn(f) => (&f.vis, &f.attrs),
        Item::Struct(s) => (&s.vis, &s.attrs),
        Item::Enum(e) => (&e.vis, &e.attrs),
        Item::Trait(t) => (&t.vis, &t.attrs),
        Item::Type(t) => (&t.vis, &t.attrs),
        Item::Const(c) => (&c.vis, &c.attrs),
        Item::Static(s) => (&s.vis, &s.attrs),
        Item::Macro(m) => {
            return m.attrs.iter().any(|a| a.path().is_ident("macro_export")) && !hidden(&m.attrs);
        }
        _ => return false,
    };
    is_pub(vis) && !hidden(attrs)
}

fn tokens(t: &impl ToTokens) -> String {
    t.to_token_stream().to_string()
}

fn strip_attrs_struct(mut s: syn::ItemStruct) -> String {
    s.attrs.clear();
    let fields: Vec<String> = s
        .fields
        .iter()
        .filter(|f| is_pub(&f.vis) && !hidden(&f.attrs))
        .map(|f| {
            let name = f
                .ident
                .as_ref()
                .map(|i| format!("{i}: "))
                .unwrap_or_default();
            format!("pub {name}{}", tokens(&f.ty))
        })
        .collect();
    let private = s.fields.iter().any(|f| !is_pub(&f.vis));
    format!(
        "pub struct {}{} {{ {}{} }}",
        s.ident,
        tokens(&s.generics),
        fields.join(", "),
        if private { ", .." } else { "" }
    )
}

/// Writes the lines of one public item shown at `path`.
fn emit(
    path: &str,
    item: &Item,
    impls: &BTreeMap<String, Vec<String>>,
    lines: &mut BTreeSet<String>,
) {
    let line = match item {
        Item::Fn(f) => {
            let mut sig = f.sig.clone();
            sig.ident = syn::Ident::new("__", sig.ident.span());
            format!("pub {}", tokens(&sig)).replacen("fn __", &format!("fn {path}"), 1)
        }
        Item::Struct(s) => strip_attrs_struct(s.clone()).replacen(
            &format!("struct {}", s.ident),
            &format!("struct {path}"),
            1,
        ),
        Item::Enum(e) => {
            let non_exhaustive = e.attrs.iter().any(|a| a.path().is_ident("non_exhaustive"));
            let variants: Vec<String> = e
                .variants
                .iter()
                .filter(|v| !hidden(&v.attrs))
                .map(|v| {
                    let mut v = v.clone();
                    v.attrs.clear();
                    for f in v.fields.iter_mut() {
                        f.attrs.clear();
                    }
                    tokens(&v)
                })
                .collect();
            format!(
                "pub enum {path}{} {{ {}{} }}",
                tokens(&e.generics),
                variants.join(", "),
                if non_exhaustive {
                    ", #[non_exhaustive]"
                } else {
                    ""
                }
            )
        }
        Item::Trait(t) => {
            for ti in &t.items {
                let mut ti = ti.clone();
                let name = match &mut ti {
                    syn::TraitItem::Fn(f) => {
                        f.attrs.clear();
                        f.default = None;
                        Some(tokens(&f.sig))
                    }
                    syn::TraitItem::Type(ty) => {
                        ty.attrs.clear();
                        Some(tokens(&*ty))
                    }
                    syn::TraitItem::Const(c) => {
                        c.attrs.clear();
                        c.default = None;
                        Some(tokens(&*c))
                    }
                    _ => None,
                };
                if let Some(n) = name {
                    lines.insert(format!("trait {path}: {n}"));
                }
            }
            format!(
                "pub trait {path}{}{}",
                tokens(&t.generics),
                if t.supertraits.is_empty() {
                    String::new()
                } else {
                    format!(": {}", tokens(&t.supertraits))
                }
            )
        }
        Item::Type(t) => format!("pub type {path}{} = {}", tokens(&t.generics), tokens(&t.ty)),
        Item::Const(c) => format!("pub const {path}: {}", tokens(&c.ty)),
        Item::Static(s) => format!("pub static {path}: {}", tokens(&s.ty)),
        Item::Macro(_) => format!("macro {path}!"),
        Item::Mod(_) => format!("pub mod {path}"),
        _ => return,
    };
    lines.insert(line);
    if let Some(name) = item_name(item)
        && let Some(members) = impls.get(&name)
    {
        for m in members {
            lines.insert(format!("impl {path}: {m}"));
        }
    }
}

fn collect_impl(imp: &syn::ItemImpl, impls: &mut BTreeMap<String, Vec<String>>) {
    let syn::Type::Path(tp) = &*imp.self_ty else {
        return;
    };
    let Some(last) = tp.path.segments.last() else {
        return;
    };
    let entry = impls.entry(last.ident.to_string()).or_default();
    match &imp.trait_ {
        Some((bang, path, _)) => {
            let neg = if bang.is_some() { "!" } else { "" };
            entry.push(format!(
                "impl{} {neg}{}",
                tokens(&imp.generics),
                tokens(path)
            ));
        }
        None => {
            for ii in &imp.items {
                if let syn::ImplItem::Fn(f) = ii
                    && is_pub(&f.vis)
                    && !hidden(&f.attrs)
                {
                    entry.push(format!("pub {}", tokens(&f.sig)));
                }
                if let syn::ImplItem::Const(c) = ii
                    && is_pub(&c.vis)
                    && !hidden(&c.attrs)
                {
                    entry.push(format!("pub const {}: {}", c.ident, tokens(&c.ty)));
                }
            }
        }
    }
}
