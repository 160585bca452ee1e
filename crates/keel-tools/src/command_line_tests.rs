//! Tests of `command_line`: what a line is taken apart into, and what is marked unread.

use super::*;

#[test]
fn a_redirection_into_a_file_is_seen_on_any_command() {
    for line in [
        "git status > src/main.rs",
        "git status >> notes",
        "git status >| notes",
        "git status &> notes",
        "git status >&notes",
        "cat <> f",
        "{ git status; } > f",
        "(git status) > f",
        "for x in a; do echo $x; done > f",
        "git status 2> errors.txt",
    ] {
        assert!(parse(line).writes_files, "{line}");
    }
    for line in [
        "git status",
        "git status 2>&1",
        "git status > /dev/null 2>&1",
        "git status &> /dev/null",
        "git status >&2",
        "git status < input.txt",
        "git status 2>&-",
    ] {
        assert!(!parse(line).writes_files, "{line}");
    }
}

#[test]
fn the_files_input_redirections_read_are_kept() {
    let reads = |line: &str| parse(line).reads_from;
    assert_eq!(
        reads("wc -l < src/main.rs"),
        vec![Some("src/main.rs".into())]
    );
    assert_eq!(
        reads("sort <'../other/.env'"),
        vec![Some("../other/.env".into())]
    );
    assert_eq!(reads("cat 0<&notes"), vec![Some("notes".into())]);
    assert_eq!(
        reads("{ cat; } < a; grep x < \"$F\""),
        vec![Some("a".into()), None]
    );
    for line in [
        "cat a",
        "cat a 2>&1",
        "cat <&0",
        "cat <&-",
        "cat > out",
        "cat <<< text",
    ] {
        assert!(reads(line).is_empty(), "{line}");
    }
}

fn commands(line: &str) -> Vec<String> {
    let parsed = parse(line);
    assert!(!parsed.unread.contains(&Construct::Unparsed), "{line:?}");
    parsed.commands.into_iter().map(|c| c.written).collect()
}

fn unread(line: &str) -> Vec<Construct> {
    parse(line).unread
}

#[test]
fn lists_and_pipelines_split_and_blanks_collapse() {
    assert_eq!(commands("a&&b"), ["a", "b"]);
    assert_eq!(commands("a||b"), ["a", "b"]);
    assert_eq!(commands("a|b"), ["a", "b"]);
    assert_eq!(commands("a & b;c"), ["a", "b", "c"]);
    assert_eq!(commands("a\nb\n"), ["a", "b"]);
    assert_eq!(commands("a |& b"), ["a 2>&1", "b"], "`|&` is `2>&1 |`");
    assert_eq!(commands("time make; ! make"), ["make", "make"]);
    assert_eq!(commands("  rm \t -rf   /x  "), ["rm -rf /x"]);
    assert_eq!(commands("rm \\\n  -rf /x"), ["rm -rf /x"]);
    assert!(commands("").is_empty());
    assert!(parse("cargo build && cargo test").understood());
}

#[test]
fn quotes_and_escapes_keep_separators_and_are_removed_from_words() {
    assert_eq!(commands("echo 'a; b'  && c"), ["echo 'a; b'", "c"]);
    assert_eq!(commands("echo \"it's\"; d"), ["echo \"it's\"", "d"]);
    assert_eq!(commands("echo a\\;b; c"), ["echo a\\;b", "c"]);
    let line = parse(r#"'rm' r""m \rm "a b\"c" ~/x"#);
    assert!(line.understood(), "{line:?}");
    let words = line.commands.first().and_then(SimpleCommand::literal_words);
    assert_eq!(
        words.unwrap(),
        ["rm", "rm", "rm", "a b\"c", "~/x"].map(String::from)
    );
}

#[test]
fn redirections_are_kept_as_written() {
    assert_eq!(commands("make 2>&1 | tee log"), ["make 2>&1", "tee log"]);
    assert_eq!(commands("make &> log; ls >>o"), ["make &>log", "ls >>o"]);
    assert!(parse("make 2>&1 >log <in").understood());
}

#[test]
fn compound_commands_show_the_commands_they_run() {
    assert_eq!(commands("(rm -rf /x)"), ["rm -rf /x"]);
    assert_eq!(commands("{ rm -rf /x; }"), ["rm -rf /x"]);
    assert_eq!(
        commands("(cd a && rm -rf b) | c"),
        ["cd a", "rm -rf b", "c"]
    );
    assert_eq!(
        commands("if true; then rm -rf /x; elif a; then b; else ls; fi"),
        ["true", "rm -rf /x", "a", "b", "ls"]
    );
    assert_eq!(
        commands("while read f; do rm  x; done < list"),
        ["read f", "rm x"]
    );
    assert_eq!(commands("until a; do b; done"), ["a", "b"]);
    assert_eq!(commands("for f in a b; do rm x; done"), ["rm x"]);
    assert_eq!(
        commands("case x in a) rm -rf /x ;; *) ls ;; esac"),
        ["rm -rf /x", "ls"]
    );
    assert_eq!(commands("iffy; done_list"), ["iffy", "done_list"]);
    assert!(parse("for f in a b; do cargo test x; done").understood());
}

#[test]
fn substitutions_are_split_out_and_marked() {
    let line = parse("echo $(rm -rf /x) end");
    assert_eq!(line.commands.len(), 2);
    assert_eq!(line.commands[1].written, "rm -rf /x");
    assert_eq!(line.commands[0].words[1], None);
    assert_eq!(line.unread, [Construct::CommandSubstitution]);
    assert!(commands("echo \"a $(rm -rf /x) b\"").contains(&"rm -rf /x".into()));
    assert!(commands("echo `rm -rf /x`; ls").contains(&"rm -rf /x".into()));
    assert!(commands("diff <(a) >(b)").contains(&"b".into()));
    assert_eq!(unread("diff <(a) >(b)"), [Construct::ProcessSubstitution]);
    assert_eq!(unread("cat < <(a)"), [Construct::ProcessSubstitution]);
    assert!(parse("echo '$(a) `b`' \\$c \\`c").understood());
}

#[test]
fn comments_are_found_even_with_quotes_in_them() {
    let line = parse("cargo build # it's fine\ntouch PWNED");
    assert_eq!(line.unread, [Construct::Comment]);
    assert_eq!(line.inert, [" it's fine"]);
    assert_eq!(
        line.commands.iter().map(|c| &c.written).collect::<Vec<_>>(),
        ["cargo build", "touch PWNED"]
    );
    assert_eq!(unread("ls #"), [Construct::Comment]);
    assert!(!unread("echo a#b '#' \"#\" \\#").contains(&Construct::Comment));
}

#[test]
fn unreadable_words_are_marked() {
    for (line, construct) in [
        ("$'rm' -rf /", Construct::AnsiCQuote),
        ("cargo test $'\\x3b' touch PWNED", Construct::AnsiCQuote),
        ("echo $\"hi\"", Construct::LocaleQuote),
        ("rm -rf $HOME", Construct::ParameterExpansion),
        ("rm -rf \"${X}\"", Construct::ParameterExpansion),
        ("echo $((1+2))", Construct::Arithmetic),
        ("r{m,} -rf /", Construct::BraceExpansion),
        ("echo {1..3}", Construct::BraceExpansion),
    ] {
        let parsed = parse(line);
        assert_eq!(parsed.unread, [construct], "{line:?}");
        assert!(parsed.commands[0].literal_words().is_none(), "{line:?}");
    }
    assert!(parse("find . -exec ls {} + '{a,b}'").understood());
    assert!(parse("$'rm' -rf /").commands[0].readable_start().is_empty());
}

#[test]
fn other_constructs_are_marked() {
    for (line, construct) in [
        ("cat <<EOF\nrm -rf /x\nEOF", Construct::HereDocument),
        ("cat <<'EOF'\nx\nEOF", Construct::HereDocument),
        ("cat <<< 'rm -rf /x'", Construct::HereString),
        ("(( x = 1 ))", Construct::Arithmetic),
        ("for ((i=0; i<2; i++)); do ls; done", Construct::Arithmetic),
        ("[[ -f x ]]", Construct::ExtendedTest),
        ("a=(x y)", Construct::ArrayAssignment),
        ("a[1]=x", Construct::ArrayAssignment),
        ("exec ls", Construct::CodeRunner),
        ("command ls", Construct::CodeRunner),
        ("builtin echo", Construct::CodeRunner),
        ("alias ls=rm", Construct::CodeRunner),
        ("eval ls", Construct::CodeRunner),
        ("source x.sh", Construct::CodeRunner),
        (". x.sh", Construct::CodeRunner),
        ("bash -c ls", Construct::CodeRunner),
        ("f() { ls; }", Construct::FunctionDefinition),
        ("function f { ls; }", Construct::FunctionDefinition),
        ("coproc ls", Construct::Coprocess),
        ("echo 'unterminated", Construct::Unparsed),
        ("if then fi", Construct::Unparsed),
    ] {
        assert_eq!(unread(line), [construct], "{line:?}");
    }
    assert_eq!(parse("cat <<EOF\nrm -rf /x\nEOF").inert, ["rm -rf /x\n"]);
    assert_eq!(
        commands("cat <<EOF\n$(rm -rf /x)\nEOF"),
        ["cat <<EOF", "rm -rf /x"]
    );
    assert_eq!(commands("cat <<'EOF'\n$(rm -rf /x)\nEOF"), ["cat <<'EOF'"]);
}

#[test]
fn lines_the_parser_cannot_take_fail_closed() {
    let group = |n| format!("{}ls{}", "{ ".repeat(n), "; }".repeat(n));
    assert_eq!(commands(&group(250)), ["ls"], "within the parser's stack");
    assert_eq!(parse(&group(1000)), CommandLine::unparsed());
    let nested = format!("echo {}ls{}", "$(".repeat(40), ")".repeat(40));
    assert!(parse(&nested).hidden);
    assert!(parse(&"a".repeat(MAX_CHARS + 1)).hidden);
    for panics in [
        "echo 99999999999>x",
        "ls ~99999999999999999999",
        "echo {1..99999999999999999999}",
    ] {
        assert_eq!(parse(panics), CommandLine::unparsed(), "{panics}");
    }
    assert!(!parse("date -d @1700000000").hidden);
}
