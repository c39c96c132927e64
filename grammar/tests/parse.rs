//! Grammar and AST tests: what each kind of line parses to, and exactly
//! where each syntax error points.

use slurp_grammar::{Diagnostic, ItemKind, SweepValues, parse, parse_command};

fn ok(src: &str) -> Vec<ItemKind> {
    let (ast, diags) = parse(src);
    assert!(
        diags.is_empty(),
        "unexpected diagnostics for {src:?}: {diags:#?}"
    );
    ast.items.into_iter().map(|i| i.kind).collect()
}

fn errors(src: &str) -> Vec<Diagnostic> {
    let (_, diags) = parse(src);
    assert!(!diags.is_empty(), "expected diagnostics for {src:?}");
    diags
}

/// The text the first label of the only diagnostic points at.
fn pointed<'a>(src: &'a str, diag: &Diagnostic) -> &'a str {
    &src[diag.primary_span().expect("a label").range()]
}

fn argv(kind: &ItemKind) -> Vec<&str> {
    let command = match kind {
        ItemKind::Plain(c) => c,
        ItemKind::Legacy(l) => &l.command,
        ItemKind::Task(t) => &t.command,
        other => panic!("no command in {other:?}"),
    };
    command.words.iter().map(|w| w.text.as_str()).collect()
}

#[test]
fn legacy_line_keeps_ncores_singlenode_and_argv() {
    let items = ok("6 0 echo a: job 1\n4 1 echo a: job 4\n");
    let ItemKind::Legacy(l) = &items[0] else {
        panic!()
    };
    assert_eq!((l.ncores.node, l.single_node.node), (6, false));
    assert_eq!(argv(&items[0]), ["echo", "a:", "job", "1"]);
    let ItemKind::Legacy(l) = &items[1] else {
        panic!()
    };
    assert_eq!((l.ncores.node, l.single_node.node), (4, true));
}

#[test]
fn plain_lines_are_commands_and_comments_blank_lines_vanish() {
    let items = ok("# header\n\ngzip -9 data/part1.csv   # trailing comment\n   \n");
    assert_eq!(items.len(), 1);
    assert_eq!(argv(&items[0]), ["gzip", "-9", "data/part1.csv"]);
}

#[test]
fn hash_inside_a_word_or_quotes_is_not_a_comment() {
    let items = ok("echo a#b '#c' \"#d\"\n");
    assert_eq!(argv(&items[0]), ["echo", "a#b", "#c", "#d"]);
}

#[test]
fn quoting_follows_the_shell() {
    let items = ok(r#"./run 'a b' "c \"d\" \x" e\ f '' "$""#);
    assert_eq!(
        argv(&items[0]),
        ["./run", "a b", r#"c "d" \x"#, "e f", "", "$"]
    );
}

#[test]
fn backslash_newline_joins_lines_and_line_numbers_follow_the_source() {
    let (ast, diags) = parse("a \\\n  b \\\n  c\nd\r\ne\n");
    assert!(diags.is_empty());
    assert_eq!(argv(&ast.items[0].kind), ["a", "b", "c"]);
    assert_eq!(
        ast.items.iter().map(|i| i.line).collect::<Vec<_>>(),
        [1, 4, 5]
    );
    assert_eq!(
        argv(&ast.items[1].kind),
        ["d"],
        "CRLF is a line end, not part of a word"
    );
}

#[test]
fn shell_syntax_is_detected_only_outside_single_quotes() {
    let shell = |src: &str| {
        let (ast, diags) = parse(src);
        assert!(diags.is_empty(), "{diags:?}");
        match &ast.items[0].kind {
            ItemKind::Plain(c) => c.shell.as_ref().map(|r| r.what.clone()),
            _ => panic!(),
        }
    };
    assert_eq!(shell("sort data | uniq"), Some("`|` pipe".into()));
    assert_eq!(shell("make && make test"), Some("`&&` and-list".into()));
    assert_eq!(shell("echo $HOME"), Some("`$` expansion".into()));
    assert_eq!(shell("echo \"$HOME\""), Some("`$` expansion".into()));
    assert_eq!(shell("ls *.csv"), Some("`*` glob".into()));
    assert_eq!(shell("cat ~/x"), Some("`~` home directory".into()));
    assert_eq!(
        shell("FOO=1 ./run"),
        Some("leading variable assignment".into())
    );
    assert_eq!(shell("cd data"), Some("`cd` is a shell builtin".into()));
    assert_eq!(shell("echo '$HOME | *'"), None);
    assert_eq!(shell("echo \\$HOME"), None);
    assert_eq!(shell("./sim --seed=3 a,b x~y"), None);
}

#[test]
fn task_line_with_sweep_attributes_and_command() {
    let items = ok("task fit[a=1,2,3 b=x,y] time=1:30:00 after=sim[{a}]: ./fit {a} {b}\n");
    let ItemKind::Task(t) = &items[0] else {
        panic!()
    };
    assert_eq!(t.name.node, "fit");
    let sweep = &t.sweep.as_ref().unwrap().node;
    assert_eq!(sweep.len(), 2);
    assert_eq!(
        sweep[0].values.node,
        SweepValues::List(vec!["1".into(), "2".into(), "3".into()])
    );
    let attrs: Vec<_> = t
        .attrs
        .iter()
        .map(|a| (a.key.node.as_str(), a.value.node.as_str()))
        .collect();
    assert_eq!(attrs, [("time", "1:30:00"), ("after", "sim[{a}]")]);
    assert_eq!(argv(&items[0]), ["./fit", "{a}", "{b}"]);
}

#[test]
fn ranges_are_inclusive_with_optional_step() {
    let items = ok("task s[i=1..100 j=0..1000:10 k=5..1:-2]: x\n");
    let ItemKind::Task(t) = &items[0] else {
        panic!()
    };
    let lens: Vec<Option<u64>> = t
        .sweep
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|v| v.values.node.len())
        .collect();
    assert_eq!(lens, [Some(100), Some(101), Some(3)]);
}

#[test]
fn lines_and_glob_are_sources_read_later() {
    let items = ok("task s[f=lines(in.txt) g=glob(data/*.csv) h=lines(../up/x)]: x\n");
    let ItemKind::Task(t) = &items[0] else {
        panic!()
    };
    let values: Vec<&SweepValues> = t
        .sweep
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|v| &v.values.node)
        .collect();
    assert_eq!(
        values,
        [
            &SweepValues::Lines("in.txt".into()),
            &SweepValues::Glob("data/*.csv".into()),
            &SweepValues::Lines("../up/x".into()),
        ]
    );
    assert!(values.iter().all(|v| v.len().is_none()));
}

#[test]
fn head_ends_at_first_colon_followed_by_space_and_values_may_be_quoted() {
    let items = ok("task a env=\"MSG=a: b\" cwd='my dir':   echo  x:y\n");
    let ItemKind::Task(t) = &items[0] else {
        panic!()
    };
    assert_eq!(t.attrs[0].value.node, "MSG=a: b");
    assert_eq!(t.attrs[1].value.node, "my dir");
    assert_eq!(argv(&items[0]), ["echo", "x:y"]);
}

#[test]
fn a_word_that_merely_starts_with_a_keyword_is_a_command() {
    let items = ok("tasks.sh run\ndefaultsfile\nincluded x\n");
    assert!(items.iter().all(|i| matches!(i, ItemKind::Plain(_))));
}

#[test]
fn defaults_and_include() {
    let items = ok("defaults cores=2 time=10m  # c\ninclude \"my tasks.slurp\"\n");
    let ItemKind::Defaults(attrs) = &items[0] else {
        panic!()
    };
    assert_eq!(attrs.len(), 2);
    let ItemKind::Include(path) = &items[1] else {
        panic!()
    };
    assert_eq!(path.node, "my tasks.slurp");
}

#[test]
fn unbalanced_quote_points_at_the_opening_quote() {
    let src = "echo ok\necho 'oops\necho fine\n";
    let diags = errors(src);
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].code, "slurp::unbalanced_quote");
    assert_eq!(diags[0].primary_span().unwrap().start, 13);
    assert_eq!(pointed(src, &diags[0]), "'");
}

#[test]
fn legacy_errors_point_at_the_field() {
    // Only `NUMBER 0|1 ...` is legacy: `3 2 echo`, `6x 0 echo` and `4` are
    // plain commands.
    let src = "0 1 echo\n3 2 echo\n6x 0 echo\n4\n99999999999 0 echo\n4 1\n";
    let diags = errors(src);
    let got: Vec<_> = diags.iter().map(|d| (d.code, pointed(src, d))).collect();
    assert_eq!(
        got,
        [
            ("slurp::legacy_ncores", "0"),
            ("slurp::legacy_ncores", "99999999999"),
            ("slurp::legacy_incomplete", "4 1"),
        ]
    );
}

#[test]
fn task_without_colon_is_an_error_not_a_plain_command() {
    let src = "task sim cores=4 ./sim --seed 3\n";
    let diags = errors(src);
    assert_eq!(diags.len(), 1);
    assert!(diags[0].message.contains("no `: `"), "{}", diags[0].message);
}

#[test]
fn bad_head_word_and_bad_sweep_are_reported_each() {
    let src = "task a cores 4: x\ntask b[seed=1..x]: y\ntask c[n=]: z\ntask d[]: w\n";
    let diags = errors(src);
    let got: Vec<_> = diags.iter().map(|d| (d.code, pointed(src, d))).collect();
    assert_eq!(
        got,
        [
            ("slurp::syntax", "cores"),
            ("slurp::syntax", "4"),
            ("slurp::bad_number", "x"),
            ("slurp::bad_sweep", ""),
            ("slurp::bad_sweep", "[]"),
        ]
    );
}

#[test]
fn task_without_command_is_reported() {
    let diags = errors("task prep:\n");
    assert_eq!(diags[0].code, "slurp::missing_command");
}

#[test]
fn command_strings_parse_like_lines() {
    let c = parse_command("./sim --seed {seed} 'a b'").unwrap();
    assert_eq!(
        c.words.iter().map(|w| &w.text[..]).collect::<Vec<_>>(),
        ["./sim", "--seed", "{seed}", "a b"]
    );
    assert!(parse_command("echo hi > out").unwrap().shell.is_some());
    assert_eq!(
        parse_command("").unwrap_err()[0].code,
        "slurp::missing_command"
    );
    assert_eq!(
        parse_command("echo 'x").unwrap_err()[0].code,
        "slurp::unbalanced_quote"
    );
}

mod properties {
    use proptest::prelude::*;

    proptest! {
        /// The grammar is total: no input makes the parser panic, and every
        /// span it reports lies inside the text on character boundaries.
        #[test]
        fn never_panics_and_spans_are_in_bounds(src in "\\PC{0,200}|[ a-z0-9#'\"\\\\:=\\[\\]{}.,|\n\r\t-]{0,200}") {
            let (ast, diags) = slurp_grammar::parse(&src);
            for d in &diags {
                for l in &d.labels {
                    prop_assert!(l.span.end as usize <= src.len());
                    prop_assert!(src.is_char_boundary(l.span.start as usize));
                    prop_assert!(src.is_char_boundary(l.span.end as usize));
                }
            }
            for item in &ast.items {
                prop_assert!(item.span.end as usize <= src.len());
            }
        }
    }
}

mod fast_path {
    use proptest::prelude::*;

    proptest! {
        /// The fast path for simple lines means exactly what the grammar
        /// means: same items, spans, line numbers and diagnostics.
        #[test]
        fn agrees_with_the_grammar(src in "([ \t]{0,2}([0-9+-]{1,3}|[a-z~#'|]{1,4}|task|include|defaults|cd|A=1)([ \t]{1,2}[a-z0-9/.=_{}#|'-]{1,5}){0,4}[ \t]{0,2}\r?\n){0,6}") {
            let fast = slurp_grammar::parse(&src);
            let slow = slurp_grammar::parse_with_grammar_only(&src);
            prop_assert_eq!(format!("{:?}", fast.0), format!("{:?}", slow.0));
            prop_assert_eq!(fast.1, slow.1);
        }
    }
}
