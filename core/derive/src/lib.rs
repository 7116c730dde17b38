//! `#[derive(Decode)]` for foldline-core's contract types.
//!
//! serde's derived deserializers are generic over the deserializer and emit a
//! visitor per type; for the ~90 contract types that was over 400 KB of the
//! WebAssembly artifact. This derive reads the same `#[serde(...)]`
//! attributes the types already carry (so serialization and decoding cannot
//! disagree on a name) and emits one small, non-generic function per type
//! that takes fields out of a parsed JSON object through
//! `foldline_core::decode`. It also emits a `serde::Deserialize` impl that
//! goes through the same function, for Rust callers that use serde.
//!
//! `#[derive(Encode)]` writes the canonical encoding (keys sorted by their
//! UTF-8 bytes, no whitespace) straight to bytes: the field order is sorted
//! when the macro runs, an internally tagged enum's tag is merged into its
//! variant's keys as they are written, and no intermediate JSON value is
//! built.
//!
//! Supported attributes (the set the core uses; anything else is a compile
//! error, never silently ignored): container `rename_all` (`camelCase`,
//! `snake_case`), `deny_unknown_fields`, `tag`; variant `rename_all`,
//! `rename`; field `default`, `default = "path"`, `rename`,
//! `skip_serializing_if`.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::quote;
use syn::{parse_macro_input, Attribute, Data, DeriveInput, Fields, LitStr};

/// Derive `foldline_core::decode::Decode` and `serde::Deserialize`.
#[proc_macro_derive(Decode, attributes(serde))]
pub fn derive_decode(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_decode(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Derive `foldline_core::canonical::Encode` (and, for structs,
/// `foldline_core::canonical::EncodeMembers`).
#[proc_macro_derive(Encode, attributes(serde))]
pub fn derive_encode(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_encode(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Naming rule of `rename_all`.
#[derive(Clone, Copy)]
enum Case {
    Camel,
    Snake,
}

impl Case {
    fn parse(s: &LitStr) -> syn::Result<Case> {
        match s.value().as_str() {
            "camelCase" => Ok(Case::Camel),
            "snake_case" => Ok(Case::Snake),
            other => Err(syn::Error::new(
                s.span(),
                format!("unsupported rename_all {other:?}"),
            )),
        }
    }

    /// A field name (`snake_case` identifier) under this rule.
    fn field(self, ident: &str) -> String {
        match self {
            Case::Snake => ident.to_string(),
            Case::Camel => {
                let mut out = String::new();
                let mut upper = false;
                for c in ident.chars() {
                    if c == '_' {
                        upper = true;
                    } else if upper {
                        out.extend(c.to_uppercase());
                        upper = false;
                    } else {
                        out.push(c);
                    }
                }
                out
            }
        }
    }

    /// A variant name (`PascalCase` identifier) under this rule.
    fn variant(self, ident: &str) -> String {
        let mut out = String::new();
        for (i, c) in ident.chars().enumerate() {
            if i == 0 {
                out.extend(c.to_lowercase());
            } else if c.is_uppercase() && matches!(self, Case::Snake) {
                out.push('_');
                out.extend(c.to_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// The serde attributes of one item.
#[derive(Default)]
struct Attrs {
    rename_all: Option<Case>,
    rename: Option<String>,
    deny_unknown_fields: bool,
    tag: Option<String>,
    /// `None`: required; `Some(None)`: `Default::default`; `Some(Some(p))`: `p()`.
    default: Option<Option<syn::Path>>,
    /// `skip_serializing_if`: the field is not written when this holds.
    skip_if: Option<syn::Path>,
    /// `alias`: other names a unit variant is read by (written by its own).
    aliases: Vec<String>,
}

fn attrs(list: &[Attribute]) -> syn::Result<Attrs> {
    let mut a = Attrs::default();
    for attr in list.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            match key.as_str() {
                "rename_all" => a.rename_all = Some(Case::parse(&meta.value()?.parse()?)?),
                "rename" => a.rename = Some(meta.value()?.parse::<LitStr>()?.value()),
                "alias" => a.aliases.push(meta.value()?.parse::<LitStr>()?.value()),
                "tag" => a.tag = Some(meta.value()?.parse::<LitStr>()?.value()),
                "deny_unknown_fields" => a.deny_unknown_fields = true,
                "default" => {
                    a.default = Some(if meta.input.peek(syn::Token![=]) {
                        Some(meta.value()?.parse::<LitStr>()?.parse::<syn::Path>()?)
                    } else {
                        None
                    })
                }
                "skip_serializing_if" => {
                    a.skip_if = Some(meta.value()?.parse::<LitStr>()?.parse::<syn::Path>()?)
                }
                _ => return Err(meta.error("attribute not supported by derive(Decode)")),
            }
            Ok(())
        })?;
    }
    Ok(a)
}

/// The container's attributes; generic types are refused (the generated
/// code names the type without parameters).
fn container(input: &DeriveInput, derive: &str) -> syn::Result<Attrs> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            format!("derive({derive}) does not support generic types"),
        ));
    }
    attrs(&input.attrs)
}

fn expand_decode(input: &DeriveInput) -> syn::Result<Tokens> {
    let name = &input.ident;
    let cattrs = container(input, "Decode")?;
    let shape = shape(input, &cattrs)?;
    let body = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(_) => {
                let (build, finish) =
                    named_fields(&s.fields, cattrs.rename_all, cattrs.deny_unknown_fields)?;
                quote! {
                    let mut f = crate::decode::Fields::open(v, at)?;
                    let out = Self #build;
                    #finish
                    Ok(out)
                }
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    name,
                    "derive(Decode) supports structs with named fields only",
                ))
            }
        },
        Data::Enum(e) => match &cattrs.tag {
            None => unit_enum(e, cattrs.rename_all)?,
            Some(tag) => tagged_enum(e, tag, &cattrs)?,
        },
        Data::Union(_) => return Err(syn::Error::new_spanned(name, "unions are not supported")),
    };
    Ok(quote! {
        impl crate::decode::Decode for #name {
            fn decode(
                v: crate::decode::Tree<'_>,
                at: &crate::decode::At<'_>,
            ) -> crate::decode::Decoded<Self> {
                #body
            }
        }
        impl<'de> ::serde::Deserialize<'de> for #name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::core::result::Result<Self, D::Error> {
                crate::decode::deserialize(d)
            }
        }
        #shape
    })
}

/// The JSON shape of a contract type, for the check that keeps the
/// TypeScript types in step (`crate::entry::schema`, compiled in tests only):
/// its fields' JSON names, whether a request may omit them, and the contract
/// type each refers to; for enums, the variants.
fn shape(input: &DeriveInput, cattrs: &Attrs) -> syn::Result<Tokens> {
    let name = &input.ident;
    let mut refs: Vec<&syn::Type> = Vec::new();
    let json = match &input.data {
        Data::Struct(s) => {
            let fields = shape_fields(&s.fields, cattrs.rename_all, &mut refs)?;
            format!("{{\"kind\":\"struct\",\"fields\":[{fields}]}}")
        }
        Data::Enum(e) => match &cattrs.tag {
            None => {
                let mut names = Vec::new();
                for v in &e.variants {
                    for l in unit_names(v, cattrs.rename_all)? {
                        names.push(format!("{:?}", l.value()));
                    }
                }
                format!("{{\"kind\":\"unit\",\"names\":[{}]}}", names.join(","))
            }
            Some(tag) => {
                let mut variants = Vec::new();
                for v in &e.variants {
                    let lit = variant_name(v, cattrs.rename_all)?.value();
                    let body = match &v.fields {
                        Fields::Unit => "{\"fields\":[]}".to_string(),
                        Fields::Unnamed(u) => {
                            let ty = &u.unnamed[0].ty;
                            refs.push(ty);
                            format!("{{\"newtype\":{:?}}}", referenced(ty).unwrap_or_default())
                        }
                        Fields::Named(_) => {
                            let va = attrs(&v.attrs)?;
                            let fields = shape_fields(&v.fields, va.rename_all, &mut refs)?;
                            format!("{{\"fields\":[{fields}]}}")
                        }
                    };
                    variants.push(format!("{lit:?}:{body}"));
                }
                format!(
                    "{{\"kind\":\"tagged\",\"tag\":{tag:?},\"variants\":{{{}}}}}",
                    variants.join(",")
                )
            }
        },
        Data::Union(_) => return Err(syn::Error::new_spanned(name, "unions are not supported")),
    };
    let key = LitStr::new(&name.to_string(), Span::call_site());
    let json = LitStr::new(&json, Span::call_site());
    Ok(quote! {
        #[cfg(test)]
        impl crate::entry::schema::Shape for #name {
            fn shapes(out: &mut crate::entry::schema::Shapes) {
                if out.insert(#key, #json).is_none() {
                    #(<#refs as crate::entry::schema::Shape>::shapes(out);)*
                }
            }
        }
    })
}

/// `{"name":…,"optional":…,"type":…}` for each named field.
fn shape_fields<'a>(
    fields: &'a Fields,
    case: Option<Case>,
    refs: &mut Vec<&'a syn::Type>,
) -> syn::Result<String> {
    let mut out = Vec::new();
    for field in fields {
        let (_, fa, json) = field_name(field, case)?;
        refs.push(&field.ty);
        let ty = referenced(&field.ty).map_or("null".to_string(), |t| format!("{t:?}"));
        out.push(format!(
            "{{\"name\":{json:?},\"optional\":{},\"type\":{ty},\"json\":{:?}}}",
            fa.default.is_some(),
            json_kind(&field.ty)
        ));
    }
    Ok(out.join(","))
}

/// A field's JSON kind, as TypeScript spells it: `string`, `number`,
/// `boolean`, `unknown` (any JSON), `object` (a contract type or a map), with
/// `[]` for an array and `|null` when `None` is written as `null`.
fn json_kind(ty: &syn::Type) -> String {
    let syn::Type::Path(p) = ty else {
        return "unknown".into();
    };
    let Some(last) = p.path.segments.last() else {
        return "unknown".into();
    };
    let inner = || match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
            syn::GenericArgument::Type(t) => Some(json_kind(t)),
            _ => None,
        }),
        _ => None,
    };
    match last.ident.to_string().as_str() {
        "Option" => format!("{}|null", inner().unwrap_or_default()),
        "Vec" => format!("{}[]", inner().unwrap_or_default()),
        "Box" => inner().unwrap_or_default(),
        "String" | "str" => "string".into(),
        "bool" => "boolean".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64" | "f64" => "number".into(),
        "Value" => "unknown".into(),
        _ => "object".into(),
    }
}

/// The contract type a field refers to, through `Option`, `Vec`, `Box` and a
/// map's values; `None` for a JSON primitive.
fn referenced(ty: &syn::Type) -> Option<String> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let name = last.ident.to_string();
    match name.as_str() {
        "Option" | "Vec" | "Box" | "BTreeMap" => match &last.arguments {
            syn::PathArguments::AngleBracketed(a) => a.args.iter().rev().find_map(|g| match g {
                syn::GenericArgument::Type(t) => Some(referenced(t)),
                _ => None,
            })?,
            _ => None,
        },
        "String" | "str" | "bool" | "u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64"
        | "f64" | "Value" => None,
        _ => Some(name),
    }
}

/// A named field's identifier, attributes and JSON name (its `rename`, or
/// the container's `rename_all` applied to the identifier).
fn field_name(field: &syn::Field, case: Option<Case>) -> syn::Result<(&syn::Ident, Attrs, String)> {
    let ident = field
        .ident
        .as_ref()
        .ok_or_else(|| syn::Error::new_spanned(field, "expected a named field"))?;
    let fa = attrs(&field.attrs)?;
    no_alias(&fa, field)?;
    let raw = ident.to_string();
    let json = fa
        .rename
        .clone()
        .unwrap_or_else(|| case.map_or(raw.clone(), |c| c.field(&raw)));
    Ok((ident, fa, json))
}

/// `{ field: f.take(..)?, ... }` and the unknown-field check for named fields.
fn named_fields(fields: &Fields, case: Option<Case>, deny: bool) -> syn::Result<(Tokens, Tokens)> {
    let mut inits = Vec::new();
    let mut names = Vec::new();
    for field in fields {
        let (ident, fa, json) = field_name(field, case)?;
        let lit = LitStr::new(&json, Span::call_site());
        let init = match &fa.default {
            None => quote! { f.take(#lit)? },
            Some(None) => quote! { f.take_or(#lit, ::core::default::Default::default)? },
            Some(Some(path)) => quote! { f.take_or(#lit, #path)? },
        };
        inits.push(quote! { #ident: #init });
        names.push(lit);
    }
    let finish = if deny {
        quote! { f.deny_unknown(&[#(#names),*])?; }
    } else {
        quote! {}
    };
    Ok((quote! { { #(#inits),* } }, finish))
}

/// `alias` where it would be ignored (a field, a variant with data) is an
/// error, not a silent no-op.
fn no_alias(a: &Attrs, at: impl quote::ToTokens) -> syn::Result<()> {
    if a.aliases.is_empty() {
        return Ok(());
    }
    Err(syn::Error::new_spanned(
        at,
        "derive(Decode): `alias` is supported on unit variants only",
    ))
}

/// A unit variant's JSON name and its aliases: every name it is read by.
fn unit_names(v: &syn::Variant, case: Option<Case>) -> syn::Result<Vec<LitStr>> {
    let mut names = vec![variant_name(v, case)?];
    for alias in attrs(&v.attrs)?.aliases {
        names.push(LitStr::new(&alias, Span::call_site()));
    }
    Ok(names)
}

fn variant_name(v: &syn::Variant, case: Option<Case>) -> syn::Result<LitStr> {
    let va = attrs(&v.attrs)?;
    let raw = v.ident.to_string();
    let json = va
        .rename
        .unwrap_or_else(|| case.map_or(raw.clone(), |c| c.variant(&raw)));
    Ok(LitStr::new(&json, Span::call_site()))
}

/// An enum of unit variants, written as a string.
fn unit_enum(e: &syn::DataEnum, case: Option<Case>) -> syn::Result<Tokens> {
    let mut arms = Vec::new();
    let mut names = Vec::new();
    for v in &e.variants {
        if !matches!(v.fields, Fields::Unit) {
            return Err(syn::Error::new_spanned(
                v,
                "derive(Decode): an enum with data needs #[serde(tag = \"...\")]",
            ));
        }
        let lits = unit_names(v, case)?;
        let ident = &v.ident;
        arms.push(quote! { #(#lits)|* => Ok(Self::#ident) });
        names.extend(lits);
    }
    Ok(quote! {
        const NAMES: &[&str] = &[#(#names),*];
        let s = crate::decode::variant(v, at)?;
        match s.as_str() {
            #(#arms,)*
            _ => Err(crate::decode::unknown_variant(at, &s, NAMES)),
        }
    })
}

/// An internally tagged enum: `{"<tag>": "<variant>", ...fields}`.
fn tagged_enum(e: &syn::DataEnum, tag: &str, cattrs: &Attrs) -> syn::Result<Tokens> {
    let tag = LitStr::new(tag, Span::call_site());
    let deny = cattrs.deny_unknown_fields;
    let mut arms = Vec::new();
    let mut names = Vec::new();
    for v in &e.variants {
        no_alias(&attrs(&v.attrs)?, v)?;
        let lit = variant_name(v, cattrs.rename_all)?;
        let ident = &v.ident;
        let arm = match &v.fields {
            Fields::Unit => {
                let finish = deny.then(|| quote! { f.deny_unknown(&[])?; });
                quote! { #lit => { #finish Ok(Self::#ident) } }
            }
            Fields::Unnamed(u) if u.unnamed.len() == 1 => {
                quote! { #lit => Ok(Self::#ident(crate::decode::Decode::decode(f.into_tree(), at)?)) }
            }
            Fields::Named(_) => {
                let va = attrs(&v.attrs)?;
                let (build, finish) = named_fields(&v.fields, va.rename_all, deny)?;
                quote! { #lit => { let out = Self::#ident #build; #finish Ok(out) } }
            }
            Fields::Unnamed(_) => {
                return Err(syn::Error::new_spanned(
                    v,
                    "derive(Decode): a tuple variant needs exactly one field",
                ))
            }
        };
        arms.push(arm);
        names.push(lit);
    }
    Ok(quote! {
        const NAMES: &[&str] = &[#(#names),*];
        let mut f = crate::decode::Fields::open(v, at)?;
        let s = f.tag(#tag)?;
        match s.as_str() {
            #(#arms,)*
            _ => Err(crate::decode::unknown_variant(&at.key(#tag), &s, NAMES)),
        }
    })
}

/// One member to write: its JSON name and how to write it.
struct Member {
    json: String,
    write: Tokens,
}

/// `w.field(..)` calls for named fields, sorted by JSON name; `access` turns
/// a field identifier into the expression that reads it.
fn encode_fields(
    fields: &Fields,
    case: Option<Case>,
    access: impl Fn(&syn::Ident) -> Tokens,
) -> syn::Result<Vec<Member>> {
    let mut out = Vec::new();
    for field in fields {
        let (ident, fa, json) = field_name(field, case)?;
        let lit = LitStr::new(&json, Span::call_site());
        let value = access(ident);
        let write = match &fa.skip_if {
            None => quote! { w.field(#lit, #value); },
            Some(path) => quote! { if !#path(#value) { w.field(#lit, #value); } },
        };
        out.push(Member { json, write });
    }
    Ok(out)
}

fn sorted(mut members: Vec<Member>) -> Vec<Tokens> {
    members.sort_by(|a, b| a.json.as_bytes().cmp(b.json.as_bytes()));
    members.into_iter().map(|m| m.write).collect()
}

fn expand_encode(input: &DeriveInput) -> syn::Result<Tokens> {
    let name = &input.ident;
    let cattrs = container(input, "Encode")?;
    match &input.data {
        Data::Struct(s) if matches!(s.fields, Fields::Named(_)) => {
            let writes = sorted(encode_fields(&s.fields, cattrs.rename_all, |i| {
                quote! { &self.#i }
            })?);
            Ok(quote! {
                impl crate::canonical::EncodeMembers for #name {
                    fn members(&self, w: &mut crate::canonical::Members<'_>) {
                        #(#writes)*
                    }
                }
                impl crate::canonical::Encode for #name {
                    fn encode(&self, out: &mut ::std::vec::Vec<u8>) {
                        crate::canonical::Members::write(out, None, None, self);
                    }
                }
            })
        }
        Data::Enum(e)
            if cattrs.tag.is_none()
                && e.variants.iter().all(|v| matches!(v.fields, Fields::Unit)) =>
        {
            // A unit enum is its name: one map, from the serde attributes, for
            // the canonical encoding and for every message or key that names it.
            let mut arms = Vec::new();
            for v in &e.variants {
                let lit = variant_name(v, cattrs.rename_all)?;
                let ident = &v.ident;
                arms.push(quote! { Self::#ident => #lit, });
            }
            Ok(quote! {
                impl #name {
                    /// The name this value is written as (its serde name).
                    pub fn as_str(self) -> &'static str {
                        match self { #(#arms)* }
                    }
                }
                impl crate::canonical::Encode for #name {
                    fn encode(&self, out: &mut ::std::vec::Vec<u8>) {
                        crate::canonical::write_str(self.as_str(), out)
                    }
                }
            })
        }
        Data::Enum(e) => {
            let mut arms = Vec::new();
            for v in &e.variants {
                let lit = variant_name(v, cattrs.rename_all)?;
                let ident = &v.ident;
                let arm = match (&cattrs.tag, &v.fields) {
                    (None, Fields::Unit) => {
                        quote! { Self::#ident => crate::canonical::write_str(#lit, out), }
                    }
                    (Some(tag), Fields::Unit) => quote! {
                        Self::#ident => crate::canonical::Members::write(out, Some((#tag, #lit)), None, &()),
                    },
                    (Some(tag), Fields::Unnamed(u)) if u.unnamed.len() == 1 => quote! {
                        Self::#ident(inner) => crate::canonical::Members::write(out, Some((#tag, #lit)), None, inner),
                    },
                    (Some(tag), Fields::Named(named)) => {
                        let va = attrs(&v.attrs)?;
                        let idents: Vec<_> = named.named.iter().map(|f| f.ident.clone()).collect();
                        let writes = sorted(encode_fields(&v.fields, va.rename_all, |i| quote! { #i })?);
                        quote! {
                            Self::#ident { #(#idents),* } => {
                                let mut w = crate::canonical::Members::open(out, Some((#tag, #lit)), None);
                                #(#writes)*
                                w.close();
                            }
                        }
                    }
                    _ => {
                        return Err(syn::Error::new_spanned(
                            v,
                            "derive(Encode): unit variants, or #[serde(tag)] with struct or one-field variants",
                        ))
                    }
                };
                arms.push(arm);
            }
            Ok(quote! {
                impl crate::canonical::Encode for #name {
                    fn encode(&self, out: &mut ::std::vec::Vec<u8>) {
                        match self { #(#arms)* }
                    }
                }
            })
        }
        _ => Err(syn::Error::new_spanned(
            name,
            "derive(Encode) supports named structs and enums",
        )),
    }
}
