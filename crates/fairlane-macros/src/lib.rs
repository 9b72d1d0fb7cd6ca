//! `#[fairlane::main]` and `#[fairlane::test]`: an `async fn` run to
//! completion on a fairlane runtime built from the attribute's options.
//! Use them through the `fairlane` crate, which re-exports both.
//!
//! Options (comma-separated, each at most once):
//! - `flavor = "current_thread"` (`Builder::new_current_thread`: one
//!   processor, the thread running the function), `"multi_thread"`
//!   (`Builder::new_multi_thread`), or `"local"` (a current-thread runtime
//!   whose function runs inside a `task::LocalSet`, so that
//!   `task::spawn_local` works in it), as tokio spells them. The default is
//!   tokio's: `multi_thread` for `main`, `current_thread` for `test`, and
//!   `multi_thread` wherever `processors` is given without a flavor.
//! - `processors = N`: the processors of a multi-thread runtime (default:
//!   one per core); `worker_threads = N` is accepted as tokio's name for
//!   the same. A current-thread runtime has one.
//! - `io_backend = "io_uring"` or `"fallback"`.
//! - `start_paused = true`: the runtime's clock starts paused
//!   (`Builder::start_paused`), as tokio's option of that name (on either
//!   flavor).
//! - `name = "…"`: the runtime's name (`Builder::name`, read back with
//!   `Handle::name`); not empty.
//! - `crate = "path"`: where the `fairlane` crate is, for a renamed
//!   dependency.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ItemFn, Lit, MetaNameValue, Token};

/// Runs an `async fn` (usually `main`) on a fairlane runtime: the
/// function becomes a plain `fn` that builds a runtime (multi-thread unless
/// the options say otherwise) and runs the body in its `block_on`.
///
/// The runtime is built before the body runs and dropped after it returns
/// (which waits for the processors to stop); a runtime that cannot be built
/// is a panic with the builder's error, as with tokio's attribute.
///
/// # Example
/// ```
/// #[fairlane::main(processors = 2)]
/// async fn main() -> std::io::Result<()> {
///     let answer = fairlane::spawn(async { 6 * 7 }).await.unwrap();
///     assert_eq!(answer, 42);
///     Ok(())
/// }
/// # fn _unused() { main().unwrap() }
/// ```
///
/// tokio's spellings work where they mean the same:
/// ```
/// #[fairlane::main(flavor = "multi_thread", worker_threads = 2)]
/// async fn main() {}
/// # fn _unused() { main() }
/// ```
///
/// On any `async fn`, and with the current-thread flavor, whose tasks run
/// on the calling thread:
/// ```
/// use fairlane::runtime::{Handle, RuntimeFlavor};
///
/// #[fairlane::main(flavor = "current_thread")]
/// async fn serve(port: u16) -> u16 {
///     assert_eq!(Handle::current().runtime_flavor(), RuntimeFlavor::CurrentThread);
///     let caller = std::thread::current().id();
///     assert_eq!(fairlane::spawn(async move { std::thread::current().id() }).await.unwrap(), caller);
///     port
/// }
///
/// assert_eq!(serve(8080), 8080);
/// ```
///
/// Misuse is a compile error, not a surprise at run time:
/// ```compile_fail
/// #[fairlane::main]
/// fn main() {} // error: the function must be `async`
/// ```
/// ```compile_fail
/// #[fairlane::main(threads = 4)] // error: unknown option `threads`
/// async fn main() {}
/// ```
/// ```compile_fail
/// #[fairlane::main(flavor = "current_thread", processors = 2)] // error: one processor
/// async fn main() {}
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into(), Kind::Main)
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

/// Runs an `async fn` test on a fresh fairlane runtime: a current-thread
/// runtime by default, as tokio's (the test's thread runs the tasks), or
/// a multi-thread one with `flavor = "multi_thread"` or `processors = N`.
///
/// # Example
/// ```
/// #[fairlane::test]
/// async fn adds() {
///     assert_eq!(fairlane::spawn(async { 1 + 1 }).await.unwrap(), 2);
/// }
///
/// #[fairlane::test(processors = 2, io_backend = "fallback")]
/// async fn on_the_fallback_backend() -> std::io::Result<()> {
///     assert_eq!(fairlane::Handle::current().io_backend(), fairlane::io::IoBackend::Fallback);
///     Ok(())
/// }
///
/// // The clock starts paused: the hour passes at once, on the clock.
/// #[fairlane::test(start_paused = true)]
/// async fn an_hour_at_once() {
///     let start = fairlane::time::Instant::now();
///     fairlane::time::sleep(std::time::Duration::from_secs(3600)).await;
///     assert_eq!(start.elapsed(), std::time::Duration::from_secs(3600));
/// }
/// # fn main() {}
/// ```
///
/// On the default flavor the test's thread is the runtime's processor:
/// ```
/// #[fairlane::test]
/// async fn on_the_current_thread() {
///     use fairlane::runtime::{Handle, RuntimeFlavor};
///     assert_eq!(Handle::current().runtime_flavor(), RuntimeFlavor::CurrentThread);
/// }
/// # fn main() {}
/// ```
///
/// A test function takes no arguments:
/// ```compile_fail
/// #[fairlane::test]
/// async fn with_an_argument(x: u32) {}
/// # fn main() {}
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into(), Kind::Test)
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Main,
    Test,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Main => "fairlane::main",
            Kind::Test => "fairlane::test",
        }
    }
}

/// The attribute's options, as parsed.
#[derive(Default)]
struct Options {
    processors: Option<(usize, Span)>,
    /// The flavor given: `Some(true)` for `current_thread`.
    current_thread: Option<(bool, Span)>,
    /// `flavor = "local"`: current-thread, the body inside a `LocalSet`.
    local: bool,
    io_backend: Option<String>,
    start_paused: bool,
    name: Option<String>,
    krate: Option<syn::Path>,
}

fn parse_options(args: TokenStream2) -> syn::Result<Options> {
    let list = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(args)?;
    let mut opts = Options::default();
    let mut seen: Vec<String> = Vec::new();
    for nv in list {
        let name = nv
            .path
            .get_ident()
            .map(ToString::to_string)
            .ok_or_else(|| syn::Error::new(nv.path.span(), "expected an option name"))?;
        // `processors` and `worker_threads` are one option.
        let key = if name == "worker_threads" {
            "processors".to_string()
        } else {
            name.clone()
        };
        if seen.contains(&key) {
            return Err(syn::Error::new(
                nv.path.span(),
                format!("option `{name}` is given twice"),
            ));
        }
        seen.push(key);
        match name.as_str() {
            "processors" | "worker_threads" => {
                let n: usize = int_value(&nv.value)?;
                if n == 0 {
                    return Err(syn::Error::new(
                        nv.value.span(),
                        format!("`{name}` must be at least 1"),
                    ));
                }
                opts.processors = Some((n, nv.value.span()));
            }
            "flavor" => match str_value(&nv.value)?.as_str() {
                "multi_thread" => opts.current_thread = Some((false, nv.value.span())),
                "current_thread" => opts.current_thread = Some((true, nv.value.span())),
                "local" => {
                    opts.current_thread = Some((true, nv.value.span()));
                    opts.local = true;
                }
                other => {
                    return Err(syn::Error::new(
                        nv.value.span(),
                        format!(
                        "unknown flavor `{other}`: expected \"multi_thread\", \"current_thread\" or \"local\""
                    ),
                    ))
                }
            },
            "io_backend" => {
                let backend = str_value(&nv.value)?;
                if backend != "io_uring" && backend != "fallback" {
                    return Err(syn::Error::new(
                        nv.value.span(),
                        format!(
                            "unknown io_backend `{backend}`: expected \"io_uring\" or \"fallback\""
                        ),
                    ));
                }
                opts.io_backend = Some(backend);
            }
            "start_paused" => opts.start_paused = bool_value(&nv.value)?,
            "name" => {
                let runtime_name = str_value(&nv.value)?;
                if runtime_name.trim().is_empty() {
                    return Err(syn::Error::new(
                        nv.value.span(),
                        "`name` must not be empty or only white space",
                    ));
                }
                opts.name = Some(runtime_name);
            }
            "crate" => {
                let path = str_value(&nv.value)?;
                opts.krate = Some(syn::parse_str(&path).map_err(|e| {
                    syn::Error::new(nv.value.span(), format!("`crate` is not a path: {e}"))
                })?);
            }
            _ => {
                return Err(syn::Error::new(
                    nv.path.span(),
                    format!(
                        "unknown option `{name}`: expected `processors`, `worker_threads`, \
                         `flavor`, `io_backend`, `start_paused`, `name` or `crate`"
                    ),
                ))
            }
        }
    }
    if let (Some((true, span)), Some((n, _))) = (opts.current_thread, opts.processors) {
        if n != 1 {
            return Err(syn::Error::new(
                span,
                format!("flavor \"current_thread\" runs one processor, but {n} were asked for"),
            ));
        }
    }
    Ok(opts)
}

fn lit(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        _ => None,
    }
}

fn int_value(value: &Expr) -> syn::Result<usize> {
    match lit(value) {
        Some(Lit::Int(i)) => i.base10_parse(),
        _ => Err(syn::Error::new(value.span(), "expected an integer literal")),
    }
}

fn bool_value(value: &Expr) -> syn::Result<bool> {
    match lit(value) {
        Some(Lit::Bool(b)) => Ok(b.value),
        _ => Err(syn::Error::new(value.span(), "expected `true` or `false`")),
    }
}

fn str_value(value: &Expr) -> syn::Result<String> {
    match lit(value) {
        Some(Lit::Str(s)) => Ok(s.value()),
        _ => Err(syn::Error::new(value.span(), "expected a string literal")),
    }
}

fn expand(args: TokenStream2, item: TokenStream2, kind: Kind) -> syn::Result<TokenStream2> {
    let opts = parse_options(args)?;
    let mut func: ItemFn = syn::parse2(item)?;
    let sig = &mut func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            format!(
                "#[{}] needs an `async fn`: the `async` keyword is missing",
                kind.name()
            ),
        ));
    }
    if kind == Kind::Test {
        if !sig.inputs.is_empty() {
            return Err(syn::Error::new(
                sig.inputs.span(),
                "a #[fairlane::test] function takes no arguments",
            ));
        }
        if let Some(attr) = func.attrs.iter().find(|a| a.path().is_ident("test")) {
            return Err(syn::Error::new(
                attr.span(),
                "#[fairlane::test] already makes a test: remove the second #[test]",
            ));
        }
    }
    sig.asyncness = None;
    let krate = opts.krate.unwrap_or_else(|| syn::parse_quote!(::fairlane));
    // tokio's defaults: `main` multi-thread, `test` current-thread; asking
    // for processors asks for a multi-thread runtime.
    let current_thread = match (opts.current_thread, opts.processors, kind) {
        (Some((current_thread, _)), _, _) => current_thread,
        (None, Some(_), _) | (None, None, Kind::Main) => false,
        (None, None, Kind::Test) => true,
    };
    let mut builder = if current_thread {
        quote! { #krate::runtime::Builder::new_current_thread() }
    } else {
        quote! { #krate::runtime::Builder::new_multi_thread() }
    };
    if let (false, Some((n, _))) = (current_thread, opts.processors) {
        builder = quote! { #builder.processors(#n) };
    }
    if let Some(backend) = opts.io_backend {
        let variant = match backend.as_str() {
            "io_uring" => quote! { IoUring },
            _ => quote! { Fallback },
        };
        builder = quote! { #builder.io_backend(#krate::io::IoBackend::#variant) };
    }
    if opts.start_paused {
        builder = quote! { #builder.start_paused(true) };
    }
    if let Some(name) = &opts.name {
        builder = quote! { #builder.name(#name) };
    }
    let body = &func.block;
    let span = body.span();
    let block = if opts.local {
        quote_spanned! {span=>
            {
                let body = async move #body;
                let runtime = #builder
                    .build()
                    .expect("failed to build the fairlane runtime");
                #krate::task::LocalSet::new().block_on(&runtime, body)
            }
        }
    } else {
        quote_spanned! {span=>
            {
                let body = async move #body;
                #builder
                    .build()
                    .expect("failed to build the fairlane runtime")
                    .block_on(body)
            }
        }
    };
    func.block = syn::parse2(block)?;
    let test_attr = (kind == Kind::Test).then(|| quote! { #[::core::prelude::v1::test] });
    Ok(quote! {
        #test_attr
        #func
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(args: TokenStream2, item: TokenStream2, kind: Kind) -> String {
        match expand(args, item, kind) {
            Ok(out) => panic!("expected an error, got {out}"),
            Err(e) => e.to_string(),
        }
    }

    #[::core::prelude::v1::test]
    fn misuse_is_named_in_the_error() {
        let main = quote! { async fn main() {} };
        let cases = [
            (
                quote! {},
                quote! { fn main() {} },
                Kind::Main,
                "`async` keyword is missing",
            ),
            (
                quote! { threads = 4 },
                main.clone(),
                Kind::Main,
                "unknown option `threads`",
            ),
            (
                quote! { processors = 0 },
                main.clone(),
                Kind::Main,
                "at least 1",
            ),
            (
                quote! { processors = "2" },
                main.clone(),
                Kind::Main,
                "integer literal",
            ),
            (
                quote! { processors = 2, worker_threads = 2 },
                main.clone(),
                Kind::Main,
                "given twice",
            ),
            (
                quote! { flavor = "single" },
                main.clone(),
                Kind::Main,
                "unknown flavor `single`",
            ),
            (
                quote! { flavor = "current_thread", processors = 2 },
                main.clone(),
                Kind::Main,
                "runs one processor",
            ),
            (
                quote! { name = " " },
                main.clone(),
                Kind::Main,
                "`name` must not be empty",
            ),
            (
                quote! { io_backend = "epoll" },
                main.clone(),
                Kind::Main,
                "unknown io_backend",
            ),
            (
                quote! { start_paused = "yes" },
                main.clone(),
                Kind::Main,
                "expected `true` or `false`",
            ),
            (
                quote! {},
                quote! { async fn t(x: u32) {} },
                Kind::Test,
                "takes no arguments",
            ),
            (
                quote! {},
                quote! { #[test] async fn t() {} },
                Kind::Test,
                "second #[test]",
            ),
        ];
        for (args, item, kind, expected) in cases {
            let message = error(args.clone(), item, kind);
            assert!(
                message.contains(expected),
                "{args}: {message:?} lacks {expected:?}"
            );
        }
    }

    #[::core::prelude::v1::test]
    fn options_become_builder_calls() {
        let out = expand(
            quote! { worker_threads = 3, io_backend = "fallback" },
            quote! { async fn main() -> u8 { 1 } },
            Kind::Main,
        )
        .unwrap()
        .to_string();
        assert!(out.contains("new_multi_thread ()"), "{out}");
        assert!(out.contains(". processors (3usize)"), "{out}");
        assert!(out.contains("IoBackend :: Fallback"), "{out}");
        let named = expand(
            quote! { name = "ingest" },
            quote! { async fn main() {} },
            Kind::Main,
        )
        .unwrap()
        .to_string();
        assert!(named.contains(". name (\"ingest\")"), "{named}");
        let local = expand(
            quote! { flavor = "local" },
            quote! { async fn t() {} },
            Kind::Test,
        )
        .unwrap()
        .to_string();
        assert!(local.contains("new_current_thread ()"), "{local}");
        assert!(
            local.contains("LocalSet :: new () . block_on (& runtime , body)"),
            "{local}"
        );
        assert!(!out.contains("async fn"), "{out}");
        let test = expand(quote! {}, quote! { async fn t() {} }, Kind::Test)
            .unwrap()
            .to_string();
        assert!(test.contains("new_current_thread ()"), "{test}");
        assert!(!test.contains("processors"), "{test}");
        assert!(test.contains("test"), "{test}");
        assert!(!test.contains("start_paused"), "{test}");
        let paused = expand(
            quote! { start_paused = true },
            quote! { async fn t() {} },
            Kind::Test,
        )
        .unwrap()
        .to_string();
        assert!(paused.contains(". start_paused (true)"), "{paused}");
    }

    #[::core::prelude::v1::test]
    fn the_flavor_picks_the_builder_as_tokio_does() {
        let expand_to = |args: TokenStream2, kind| {
            expand(args, quote! { async fn f() {} }, kind)
                .unwrap()
                .to_string()
        };
        let cases = [
            (quote! {}, Kind::Main, "new_multi_thread"),
            (quote! {}, Kind::Test, "new_current_thread"),
            (
                quote! { flavor = "current_thread" },
                Kind::Main,
                "new_current_thread",
            ),
            (
                quote! { flavor = "multi_thread" },
                Kind::Test,
                "new_multi_thread",
            ),
            (quote! { processors = 2 }, Kind::Test, "new_multi_thread"),
            (
                quote! { flavor = "current_thread", worker_threads = 1 },
                Kind::Test,
                "new_current_thread",
            ),
        ];
        for (args, kind, builder) in cases {
            let out = expand_to(args.clone(), kind);
            assert!(out.contains(builder), "{args}: {out}");
        }
        // Any function name, arguments included, for `main`.
        let out = expand(
            quote! {},
            quote! { async fn serve(port: u16) -> u16 { port } },
            Kind::Main,
        )
        .unwrap()
        .to_string();
        assert!(out.contains("fn serve (port : u16) -> u16"), "{out}");
    }
}
