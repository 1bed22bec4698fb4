; Hand-written for GenEnv Workbench: a small kitchen, task "put a cool bread in diningtable".
(define (problem wb_pick_cool_then_place_bread_diningtable)
  (:domain alfred)
  (:objects
    agent1 - agent
    BreadType - otype
    KnifeType - otype
    AppleType - otype
    FridgeType - rtype
    DiningTableType - rtype
    CounterTopType - rtype
    CabinetType - rtype
    Bread_bar_01 - object
    Knife_bar_01 - object
    Apple_bar_01 - object
    Fridge_bar_01 - receptacle
    DiningTable_bar_01 - receptacle
    CounterTop_bar_01 - receptacle
    Cabinet_bar_01 - receptacle
    loc_bar_start - location
    loc_bar_01 - location
    loc_bar_02 - location
    loc_bar_03 - location
    loc_bar_04 - location
  )
  (:init
    (atLocation agent1 loc_bar_start)
    (receptacleType Fridge_bar_01 FridgeType)
    (receptacleType DiningTable_bar_01 DiningTableType)
    (receptacleType CounterTop_bar_01 CounterTopType)
    (receptacleType Cabinet_bar_01 CabinetType)
    (receptacleAtLocation Fridge_bar_01 loc_bar_01)
    (receptacleAtLocation DiningTable_bar_01 loc_bar_02)
    (receptacleAtLocation CounterTop_bar_01 loc_bar_03)
    (receptacleAtLocation Cabinet_bar_01 loc_bar_04)
    (openable Fridge_bar_01)
    (openable Cabinet_bar_01)
    (objectType Bread_bar_01 BreadType)
    (objectType Knife_bar_01 KnifeType)
    (objectType Apple_bar_01 AppleType)
    (pickupable Bread_bar_01)
    (pickupable Knife_bar_01)
    (pickupable Apple_bar_01)
    (coolable Bread_bar_01)
    (heatable Bread_bar_01)
    (coolable Apple_bar_01)
    (heatable Apple_bar_01)
    (cleanable Knife_bar_01)
    (inReceptacle Bread_bar_01 CounterTop_bar_01)
    (inReceptacle Knife_bar_01 CounterTop_bar_01)
    (inReceptacle Apple_bar_01 Fridge_bar_01)
    (objectAtLocation Bread_bar_01 loc_bar_03)
    (objectAtLocation Knife_bar_01 loc_bar_03)
    (objectAtLocation Apple_bar_01 loc_bar_01)
    (canContain FridgeType BreadType)
    (canContain FridgeType AppleType)
    (canContain DiningTableType BreadType)
    (canContain DiningTableType KnifeType)
    (canContain DiningTableType AppleType)
    (canContain CounterTopType BreadType)
    (canContain CounterTopType KnifeType)
    (canContain CounterTopType AppleType)
    (canContain CabinetType KnifeType)
  )
  (:goal
    (and
      (exists (?r - receptacle)
        (exists (?o - object)
          (and
            (coolable ?o)
            (objectType ?o BreadType)
            (receptacleType ?r DiningTableType)
            (isCool ?o)
            (inReceptacle ?o ?r)
          )
        )
      )
    )
  )
)
