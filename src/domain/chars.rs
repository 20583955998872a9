//! Which characters a name or a text may hold.
//!
//! - A name (username) is refused when it holds a control character or a bidirectional
//!   override or isolate (U+202A–U+202E, U+2066–U+2069: they make a name display as another),
//!   and when nothing in it is visible: it must hold at least one character that is neither
//!   white space, a control character, nor default-ignorable (zero-width spaces and joiners,
//!   U+FEFF, variation selectors, tags, …). Joiners inside a name stay valid, so emoji
//!   sequences such as 👩‍💻 and scripts that need U+200C/U+200D keep working.
//! - A text (title, content) may not hold control characters other than `\n`, `\r` and `\t`
//!   (NUL, ESC, DEL, C1 controls, …), and must also hold a visible character.

/// A bidirectional embedding, override or isolate control (not the plain LRM/RLM marks).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Unicode's `Default_Ignorable_Code_Point` property (DerivedCoreProperties.txt, Unicode 15.1):
/// characters that render as nothing when not supported.
pub fn is_default_ignorable(c: char) -> bool {
    matches!(c,
        '\u{00AD}'
        | '\u{034F}'
        | '\u{061C}'
        | '\u{115F}'..='\u{1160}'
        | '\u{17B4}'..='\u{17B5}'
        | '\u{180B}'..='\u{180F}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}'
        | '\u{3164}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FEFF}'
        | '\u{FFA0}'
        | '\u{FFF0}'..='\u{FFF8}'
        | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// A character that shows: not white space, not a control character, not default-ignorable.
pub fn is_visible(c: char) -> bool {
    !c.is_whitespace() && !c.is_control() && !is_default_ignorable(c)
}

/// A control character a text may not hold (all but `\n`, `\r`, `\t`).
pub fn is_forbidden_in_text(c: char) -> bool {
    c.is_control() && !matches!(c, '\n' | '\r' | '\t')
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for c in ['a', 'ж', '標', 'ا', 'क', '👩', '💻', '.', '\u{0301}'] {
            assert!(is_visible(c), "U+{:04X}", c as u32);
        }
    }
}
