use super::*;
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, EnumValueDescriptorProto, FieldDescriptorProto,
    FileDescriptorProto, FileDescriptorSet,
};

fn field(name: &str, number: i32, t: Type, type_name: Option<&str>) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(t as i32),
        type_name: type_name.map(Into::into),
        ..Default::default()
    }
}

/// `t.Device { string id = 1; bytes fp = 2; }` and `t.Payment { string
/// amount = 1; int64 count = 2; Device device = 3; repeated string tags = 4;
/// Kind kind = 5; float ratio = 6; }`, `enum Kind { NONE = 0; POS = 2; }`.
fn descriptor_set() -> Vec<u8> {
    let mut tags = field("tags", 4, Type::String, None);
    tags.label = Some(Label::Repeated as i32);
    let file = FileDescriptorProto {
        name: Some("t.proto".into()),
        package: Some("t".into()),
        syntax: Some("proto3".into()),
        message_type: vec![
            DescriptorProto {
                name: Some("Device".into()),
                field: vec![
                    field("id", 1, Type::String, None),
                    field("fp", 2, Type::Bytes, None),
                ],
                ..Default::default()
            },
            DescriptorProto {
                name: Some("Payment".into()),
                field: vec![
                    field("amount", 1, Type::String, None),
                    field("count", 2, Type::Int64, None),
                    field("device", 3, Type::Message, Some(".t.Device")),
                    tags,
                    field("kind", 5, Type::Enum, Some(".t.Kind")),
                    field("ratio", 6, Type::Float, None),
                ],
                ..Default::default()
            },
        ],
        enum_type: vec![EnumDescriptorProto {
            name: Some("Kind".into()),
            value: vec![
                EnumValueDescriptorProto {
                    name: Some("NONE".into()),
                    number: Some(0),
                    ..Default::default()
                },
                EnumValueDescriptorProto {
                    name: Some("POS".into()),
                    number: Some(2),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    FileDescriptorSet { file: vec![file] }.encode_to_vec()
}

fn decoder() -> ProtobufDecoder {
    ProtobufDecoder::from_bytes(&descriptor_set(), "t.Payment", Path::new("t.desc")).unwrap()
}

fn encode(d: &ProtobufDecoder, fill: impl FnOnce(&mut DynamicMessage)) -> Vec<u8> {
    let mut m = DynamicMessage::new(d.message.clone());
    fill(&mut m);
    m.encode_to_vec()
}

#[test]
fn a_message_maps_to_json_with_proto_names_hex_bytes_and_enum_names() {
    let d = decoder();
    let device_type = d
        .message
        .parent_pool()
        .get_message_by_name("t.Device")
        .unwrap();
    let bytes = encode(&d, |m| {
        m.set_field_by_name("amount", Value::String("19.99".into()));
        m.set_field_by_name("count", Value::I64(9_007_199_254_740_993));
        let mut device = DynamicMessage::new(device_type);
        device.set_field_by_name("id", Value::String("d\"1".into()));
        device.set_field_by_name("fp", Value::Bytes(vec![0, 255, 16].into()));
        m.set_field_by_name("device", Value::Message(device));
        m.set_field_by_name(
            "tags",
            Value::List(vec![Value::String("a".into()), Value::String("b".into())]),
        );
        m.set_field_by_name("kind", Value::EnumNumber(2));
        m.set_field_by_name("ratio", Value::F32(0.1));
    });
    let json = String::from_utf8(d.to_json(&bytes).unwrap()).unwrap();
    assert_eq!(
        json,
        r#"{"amount":"19.99","count":9007199254740993,"device":{"id":"d\"1","fp":"00ff10"},"tags":["a","b"],"kind":"POS","ratio":0.1}"#
    );
}

#[test]
fn unset_fields_read_as_protobuf_defines_them() {
    let d = decoder();
    let json = String::from_utf8(d.to_json(&encode(&d, |_| {})).unwrap()).unwrap();
    assert_eq!(
        json,
        r#"{"amount":"","count":0,"device":null,"tags":[],"kind":"NONE","ratio":0}"#
    );
}

#[test]
fn bad_values_and_types_say_what_is_wrong() {
    let d = decoder();
    let err = d.to_json(&[0x0a, 0x05, b'a']).unwrap_err();
    assert!(err.contains("not a protobuf `t.Payment`"), "{err}");
    let err = ProtobufDecoder::from_bytes(&descriptor_set(), "t.Nope", Path::new("t.desc"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no message `t.Nope`") && err.contains("t.Payment"),
        "{err}"
    );
    let err =
        ProtobufDecoder::from_bytes(b"\xff\xff", "t.Payment", Path::new("x.desc")).unwrap_err();
    assert!(
        format!("{err:#}").contains("x.desc is not a protobuf descriptor set"),
        "{err:#}"
    );
}
