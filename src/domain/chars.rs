//! Which characters a name or a text may hold.
//!
//! - A name (username) is refused when it holds a control character, a line or paragraph
//!   separator (U+2028, U+2029: line breaks, as `\n` is), or a bidirectional
//!   override or isolate (U+202A–U+202E, U+2066–U+2069: they make a name display as another),
//!   and when nothing in it is visible: it must hold at least one character that shows on its
//!   own ([`is_visible`]: not white space, default-ignorable, a control, format or unassigned
//!   code point, a lone combining mark, nor a blank-looking filler such as U+2800 or U+3164).
//!   Joiners and marks inside a name stay valid, so emoji sequences such as 👩‍💻 and scripts
//!   that need U+200C/U+200D or combining marks keep working.
//! - A text (title, content) may not hold control characters other than `\n`, `\r` and `\t`
//!   (NUL, ESC, DEL, C1 controls, …), and must also hold a visible character.
//! - A word (a tag) is letters and digits of one writing system, `-` and `_` ([`word_flaw`]):
//!   nothing invisible or blank in it (the same [`is_default_ignorable`] and blank symbols a
//!   name needs more than, so U+3164 and U+115F are refused in both), at least one visible
//!   letter or digit (as a name needs a visible character), and no letters of two scripts, so
//!   that a word cannot look like another (Cyrillic `р` and `а` among Latin letters).

use icu_properties::props::{
    DefaultIgnorableCodePoint, GeneralCategory, GeneralCategoryGroup, Script, WhiteSpace,
};
use icu_properties::{CodePointMapData, CodePointSetData};

/// A bidirectional embedding, override or isolate control (not the plain LRM/RLM marks).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A line or paragraph separator (U+2028, U+2029): a line break, refused in a name as `\n` is.
pub fn is_line_separator(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
}

/// Unicode's `Default_Ignorable_Code_Point` property: characters that render as nothing when
/// not supported (zero-width spaces and joiners, U+FEFF, variation selectors, tags, the Hangul
/// fillers, …), from the Unicode Character Database as `icu_properties` ships it.
pub fn is_default_ignorable(c: char) -> bool {
    CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// Symbols drawn as an empty cell, which no Unicode property singles out: the Braille pattern
/// with no dots, and the musical null notehead.
const BLANK_SYMBOLS: [char; 2] = ['\u{2800}', '\u{1D159}'];

/// The general categories of characters that show nothing on their own: separators (spaces,
/// line and paragraph separators), controls, format characters, surrogates, private-use and
/// unassigned code points, and marks (a combining mark draws only on a base character).
const SHOWS_NOTHING_ALONE: GeneralCategoryGroup = GeneralCategoryGroup::Separator
    .union(GeneralCategoryGroup::Other)
    .union(GeneralCategoryGroup::Mark);

/// A character that shows on its own: not `White_Space`, not `Default_Ignorable_Code_Point`, not
/// of a category that shows nothing alone, not a blank symbol. Every script's letters, digits,
/// punctuation and symbols (emoji included) are visible; a name or text needs one of them, and
/// may then hold any of the others (joiners in emoji sequences, marks on their base letters).
pub fn is_visible(c: char) -> bool {
    !CodePointSetData::new::<WhiteSpace>().contains(c)
        && !is_default_ignorable(c)
        && !SHOWS_NOTHING_ALONE.contains(CodePointMapData::<GeneralCategory>::new().get(c))
        && !BLANK_SYMBOLS.contains(&c)
}

/// Why `s` is not a word, or `None` when it is one. A word's characters are letters and digits
/// (`char::is_alphanumeric`, of any script) and `-` and `_`, none of them default-ignorable or
/// a blank symbol (the Hangul fillers are letters by category, and show nothing); at least one
/// is a visible letter or digit; and its letters and digits are of one script besides Common
/// and Inherited, where Han goes with the scripts written alongside it (Hiragana and Katakana,
/// Hangul, Bopomofo), as UTS #39's restriction levels allow.
pub fn word_flaw(s: &str) -> Option<String> {
    let shown = s.escape_debug();
    let allowed = |c: char| {
        (c.is_alphanumeric() || c == '-' || c == '_')
            && !is_default_ignorable(c)
            && !BLANK_SYMBOLS.contains(&c)
    };
    if let Some(c) = s.chars().find(|&c| !allowed(c)) {
        return Some(format!(
            "holds only letters, digits, `-` and `_` (`{shown}` holds U+{:04X})",
            c as u32
        ));
    }
    if !s.chars().any(|c| c.is_alphanumeric() && is_visible(c)) {
        return Some(format!("needs a letter or a digit (`{shown}` has none)"));
    }
    let scripts = CodePointMapData::<Script>::new();
    let mut seen: Vec<(Script, char)> = Vec::new();
    for c in s.chars() {
        let script = scripts.get(c);
        if script != Script::Common
            && script != Script::Inherited
            && !seen.iter().any(|(s, _)| *s == script)
        {
            seen.push((script, c));
        }
    }
    let one_system = |system: &[Script]| seen.iter().all(|(s, _)| system.contains(s));
    let systems: [&[Script]; 3] = [
        &[Script::Han, Script::Hiragana, Script::Katakana],
        &[Script::Han, Script::Hangul],
        &[Script::Han, Script::Bopomofo],
    ];
    match seen.as_slice() {
        [] | [_] => None,
        _ if systems.iter().any(|system| one_system(system)) => None,
        [(_, a), (_, b), ..] => Some(format!(
            "holds letters of one script (`{shown}` mixes U+{:04X} and U+{:04X})",
            *a as u32, *b as u32
        )),
    }
}

/// A control character a text may not hold (all but `\n`, `\r`, `\t`).
pub fn is_forbidden_in_text(c: char) -> bool {
    c.is_control() && !matches!(c, '\n' | '\r' | '\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_visible_letters_and_digits_of_one_script() {
        for word in [
            "rust",
            "snake_case",
            "x-1",
            "2026",
            "café",
            "раст",
            "東京タワー",
            "한국어",
            "हिंदी",
        ] {
            assert_eq!(word_flaw(word), None, "{word}");
        }
        for bad in [
            "\u{3164}",
            "\u{115F}",
            "a\u{3164}b",
            "a\u{200B}b",
            "-",
            "---",
            "_",
            "раst",
            "pаypal",
            "c++",
            "a b",
            "\u{2800}",
            "e\u{301}",
        ] {
            assert!(word_flaw(bad).is_some(), "{}", bad.escape_debug());
        }
    }

    #[test]
    fn invisible_characters_are_not_visible() {
        for c in [
            ' ',
            '\u{A0}',
            '\u{3000}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{FEFF}',
            '\u{2060}',
            '\u{FE0F}',
            '\u{E0041}',
            '\u{3164}',
            '\u{AD}',
            '\u{0}',
            '\u{1B}',
            '\u{85}',
        ] {
            assert!(!is_visible(c), "U+{:04X}", c as u32);
        }
        // Blank-looking fillers, and marks with no base.
        for c in [
            '\u{2800}',
            '\u{115F}',
            '\u{1160}',
            '\u{FFA0}',
            '\u{1D159}',
            '\u{0301}',
            '\u{20DD}',
            '\u{093F}',
            '\u{2028}',
            '\u{E000}',
            '\u{180E}',
        ] {
            assert!(!is_visible(c), "U+{:04X}", c as u32);
        }
        for c in [
            'a', 'ж', '標', 'ا', 'क', 'ก', 'ᄀ', '가', 'ᐁ', '👩', '💻', '🇵', '.', '1', '#', '€',
            '\u{2801}',
        ] {
            assert!(is_visible(c), "U+{:04X}", c as u32);
        }
    }
}
