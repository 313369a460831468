//! Sprig's numbers (`numeric.go` and its part of `funcMap()`): integer and float
//! arithmetic, `max`/`min`, `floor`/`ceil`/`round`, the conversions (`int`, `int64`,
//! `float64`, `atoi`, `toDecimal`), the sequences (`until`, `untilStep`, `seq`) and
//! `randInt`.

use ring::rand::SecureRandom as _;

use super::{ANY, Args, Func, FuncResult, func, to_float64, to_int64};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's math functions.
pub(super) const FUNCS: &[Func] = &[
    func("add", 0, ANY, add),
    func("add1", 1, ANY, add1),
    func("sub", 2, 2, sub),
    func("div", 2, 2, div),
    func("mod", 2, 2, div),
    func("mul", 0, ANY, mul),
    func("max", 0, ANY, max),
    func("biggest", 0, ANY, max),
    func("min", 0, ANY, min),
    func("floor", 1, ANY, floor),
    func("ceil", 1, ANY, ceil),
    func("round", 1, ANY, round),
    func("addf", 0, ANY, addf),
    func("add1f", 1, ANY, add1f),
    func("subf", 1, ANY, subf),
    func("mulf", 0, ANY, mulf),
    func("divf", 1, ANY, divf),
    func("maxf", 0, ANY, maxf),
    func("minf", 0, ANY, minf),
    func("atoi", 0, ANY, atoi),
    func("int", 1, 1, int),
    func("int64", 1, 1, int64),
    func("float64", 1, 1, float64),
    func("toDecimal", 1, 1, float64),
    func("until", 1, ANY, until),
    func("untilStep", 3, ANY, until_step),
    func("seq", 0, ANY, seq),
    func("randInt", 2, 2, rand_int),
];

fn ints(a: &Args<'_>) -> impl Iterator<Item = i64> {
    a.all().iter().map(to_int64)
}

fn floats(a: &Args<'_>) -> impl Iterator<Item = f64> {
    a.all().iter().map(to_float64)
}

fn add(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int64(ints(&a).fold(0i64, i64::wrapping_add)))
}

fn add1(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int64(a.int(0).wrapping_add(1)))
}

fn sub(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int64(a.int(0).wrapping_sub(a.int(1))))
}

fn mul(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int64(ints(&a).fold(1i64, i64::wrapping_mul)))
}

/// `div` and `mod`, told apart by the called name.
fn div(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let d = a.int(1);
    if d == 0 {
        return Err("runtime error: integer divide by zero".into());
    }
    Ok(Value::int64(if a.name() == "div" { a.int(0).wrapping_div(d) } else { a.int(0).wrapping_rem(d) }))
}

fn max(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int64(ints(&a).max().unwrap_or(0)))
}

fn min(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int64(ints(&a).min().unwrap_or(0)))
}

fn floor(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(a.float(0).floor()))
}

fn ceil(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(a.float(0).ceil()))
}

fn round(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let places = a.all().get(1).map_or(0, to_int64) as i32;
    let f = 10f64.powi(places);
    Ok(Value::Float((a.float(0) * f).round() / f))
}

fn addf(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(floats(&a).sum()))
}

fn add1f(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(a.float(0) + 1.0))
}

fn subf(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(floats(&a).skip(1).fold(a.float(0), |acc, v| acc - v)))
}

fn mulf(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(floats(&a).product()))
}

fn divf(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(floats(&a).skip(1).fold(a.float(0), |acc, v| acc / v)))
}

fn maxf(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(floats(&a).fold(f64::MIN, f64::max)))
}

fn minf(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(floats(&a).fold(f64::MAX, f64::min)))
}

fn atoi(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int(a.str(0).trim().parse().unwrap_or(0)))
}

fn int(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int(a.int(0)))
}

fn int64(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::int64(a.int(0)))
}

/// `float64` and `toDecimal`.
fn float64(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Float(a.float(0)))
}

fn until(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::list((0..a.int(0).max(0)).map(Value::int).collect()))
}

fn until_step(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (start, stop, step) = (a.int(0), a.int(1), a.int(2));
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(Value::int(i));
        let Some(next) = i.checked_add(step) else { break };
        i = next;
    }
    Ok(Value::list(out))
}

fn seq(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let nums: Vec<i64> = ints(&a).collect();
    let (start, step, end) = match nums.as_slice() {
        [end] => (1, if *end >= 1 { 1 } else { -1 }, *end),
        [start, end] => (*start, if end >= start { 1 } else { -1 }, *end),
        [start, step, end] => (*start, *step, *end),
        _ => return Ok(Value::str("")),
    };
    let mut out = Vec::new();
    if step != 0 {
        let mut i = start;
        while (step > 0 && i <= end) || (step < 0 && i >= end) {
            out.push(i.to_string());
            let Some(next) = i.checked_add(step) else { break };
            i = next;
        }
    }
    Ok(Value::str(out.join(" ")))
}

/// A random integer in `[min, max)`, as Sprig's `randInt` (Go panics when `max <= min`;
/// here that is an error).
fn rand_int(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    let (lo, hi) = (a.int(0), a.int(1));
    if hi <= lo {
        return Err("invalid argument to Intn".into());
    }
    let mut bytes = [0u8; 8];
    ring::rand::SystemRandom::new().fill(&mut bytes).map_err(|_| "no random source")?;
    let span = hi.wrapping_sub(lo) as u64;
    Ok(Value::int(lo.wrapping_add((u64::from_le_bytes(bytes) % span) as i64)))
}
